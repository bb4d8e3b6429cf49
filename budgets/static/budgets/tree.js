// The tree editor's two behaviours, as a static file so the Content-Security-Policy allows no inline script.
(function () {
  // On a narrow screen the panel sits above the tree: bring it into view when a node opens.
  document.addEventListener("htmx:afterSwap", function (event) {
    if (event.detail.target.id === "node-panel" && window.matchMedia("(max-width: 960px)").matches) {
      event.detail.target.scrollIntoView({ block: "start" });
    }
  });
  // The panel's close link: without JavaScript it goes to the tree page; with it, the panel closes in place.
  document.addEventListener("click", function (event) {
    var link = event.target.closest("[data-close-panel]");
    if (!link) { return; }
    event.preventDefault();
    link.closest(".panel-inner").remove();
    history.replaceState(null, "", link.href);
  });
})();
