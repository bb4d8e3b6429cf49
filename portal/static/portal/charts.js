// Draw every figure the page (or an htmx swap) brought as a JSON data block: no inline script,
// so the Content-Security-Policy needs none. Plotly sizes a graph when it is drawn; the page's
// grid settles afterwards (and phones rotate), so graphs are fitted to their cards again on
// load and whenever the window changes size.
(function () {
  function draw(root) {
    if (!window.Plotly) { return; }
    (root || document).querySelectorAll("script[data-plotly-figure]").forEach(function (block) {
      var graph = document.getElementById(block.dataset.plotlyFigure);
      if (!graph || graph.classList.contains("js-plotly-plot")) { return; }
      var figure = JSON.parse(block.textContent);
      window.Plotly.newPlot(graph, figure.data, figure.layout, figure.config);
    });
  }
  function fit() {
    document.querySelectorAll(".js-plotly-plot").forEach(function (graph) {
      if (window.Plotly) { window.Plotly.Plots.resize(graph); }
    });
  }
  document.addEventListener("DOMContentLoaded", function () { draw(document); });
  document.addEventListener("htmx:load", function (event) { draw(event.target); });
  window.addEventListener("load", function () { draw(document); fit(); });
  window.addEventListener("resize", fit);
})();
