// Draws every chart of the page once plotly.js (loaded with defer, before this file) is there:
// each graph div has its figure in a JSON block <script id="<div id>-figure">, written by
// portal/charts.py. The numbers of the page paint first; no inline script waits for plotly.js.
// Plotly sizes a graph when it is drawn; the page's grid settles afterwards (and phones rotate),
// so fit every graph to its card once the page has loaded and whenever the window changes size.
(function () {
  function draw() {
    if (!window.Plotly) { return; }
    document.querySelectorAll("[data-chart]").forEach(function (graph) {
      var source = document.getElementById(graph.id + "-figure");
      if (!source || graph.classList.contains("js-plotly-plot")) { return; }
      var figure = JSON.parse(source.textContent);
      window.Plotly.newPlot(graph, figure.data, figure.layout, figure.config);
    });
  }
  function fit() {
    document.querySelectorAll(".js-plotly-plot").forEach(function (graph) {
      if (window.Plotly) { window.Plotly.Plots.resize(graph); }
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
  window.addEventListener("load", fit);
  window.addEventListener("resize", fit);
})();
