// Draws every chart of the page once plotly.js (loaded with defer, before this file) is there:
// each graph div has its figure in a JSON block <script id="<div id>-figure">, written by
// portal/charts.py. The numbers of the page paint first; no inline script waits for plotly.js.
// Plotly sizes a graph when it is drawn; the page's grid settles afterwards (and phones rotate),
// so fit every graph to its card once the page has loaded and whenever the window changes size.
(function () {
  // One chart per task, top of the page first: the browser paints each as soon as it is drawn.
  function draw() {
    if (!window.Plotly) { return; }
    var graphs = Array.prototype.slice.call(document.querySelectorAll("[data-chart]"));
    (function next() {
      var graph = graphs.shift();
      if (!graph) { return; }
      var source = document.getElementById(graph.id + "-figure");
      if (source && !graph.classList.contains("js-plotly-plot")) {
        var figure = JSON.parse(source.textContent);
        window.Plotly.newPlot(graph, figure.data, figure.layout, figure.config);
      }
      setTimeout(next, 0);
    })();
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
  document.addEventListener("htmx:afterSettle", draw);  // charts inside a fragment htmx swapped in
  window.addEventListener("load", fit);
  window.addEventListener("resize", fit);
})();
