// The budget tree: a search box and collapsible subtrees. Progressive enhancement: without
// JavaScript the whole tree shows and the search box stays hidden. The tree is re-rendered by
// htmx after every edit, so the folds and the query are re-applied to each new copy (htmx.onLoad).
(function () {
  const folded = new Set(); // paths the reader folded; kept across the tree's re-renders

  function treeRows() {
    return Array.from(document.querySelectorAll("#budget-tree tr.tree-row"));
  }

  function ancestorsOf(path) {
    const parts = path.split("/");
    return parts.slice(0, -1).map((_, i) => parts.slice(0, i + 1).join("/"));
  }

  function matchingPaths(rows, query) {
    // A row matches by name or path; its ancestors stay visible so the match keeps its place.
    const shown = new Set();
    for (const row of rows) {
      const text = (row.dataset.name + " " + row.dataset.path).toLowerCase();
      if (text.includes(query)) {
        shown.add(row.dataset.path);
        ancestorsOf(row.dataset.path).forEach((path) => shown.add(path));
      }
    }
    return shown;
  }

  function apply() {
    const box = document.getElementById("tree-search");
    const query = box ? box.value.trim().toLowerCase() : "";
    const rows = treeRows();
    const shown = query ? matchingPaths(rows, query) : null;
    let visible = 0;
    for (const row of rows) {
      const path = row.dataset.path;
      row.hidden = shown ? !shown.has(path) : ancestorsOf(path).some((a) => folded.has(a));
      visible += row.hidden ? 0 : 1;
      const fold = row.querySelector("button.fold");
      if (fold) fold.setAttribute("aria-expanded", String(shown !== null || !folded.has(path)));
    }
    const count = document.getElementById("tree-search-count");
    if (count) count.textContent = query ? `${visible} of ${rows.length} nodes shown` : "";
  }

  function decorate() {
    const rows = treeRows();
    const parents = new Set(rows.map((row) => ancestorsOf(row.dataset.path).pop()).filter(Boolean));
    for (const row of rows) {
      const cell = row.querySelector("td.name");
      if (!cell || cell.querySelector(".fold, .fold-spacer")) continue;
      if (!parents.has(row.dataset.path)) {
        cell.prepend(Object.assign(document.createElement("span"), { className: "fold-spacer" }));
        continue;
      }
      const fold = document.createElement("button");
      fold.type = "button";
      fold.className = "fold";
      fold.setAttribute("aria-label", `Fold or unfold ${row.dataset.name}`);
      fold.addEventListener("click", () => {
        folded.has(row.dataset.path) ? folded.delete(row.dataset.path) : folded.add(row.dataset.path);
        apply();
      });
      cell.prepend(fold);
    }
    apply();
  }

  document.addEventListener("DOMContentLoaded", () => {
    const search = document.getElementById("tree-search-box");
    if (search) {
      search.hidden = false;
      document.getElementById("tree-search").addEventListener("input", apply);
    }
  });
  htmx.onLoad(decorate);
})();

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
