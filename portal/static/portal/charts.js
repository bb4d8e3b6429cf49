// Plotly sizes a graph when it is drawn; the page's grid settles afterwards (and phones rotate),
// so fit every graph to its card once the page has loaded and whenever the window changes size.
(function () {
  function fit() {
    document.querySelectorAll(".js-plotly-plot").forEach(function (graph) {
      if (window.Plotly) { window.Plotly.Plots.resize(graph); }
    });
  }
  window.addEventListener("load", fit);
  window.addEventListener("resize", fit);
})();
