// Click a bar, a cell or a step track (or a flow graph's bar or mark): its details stay in the
// panel below the picture.
document.querySelectorAll("svg.tl, svg.fl").forEach(function (svg) {
  var panel = document.getElementById(svg.getAttribute("data-panel"));
  svg.addEventListener("click", function (event) {
    var shape = event.target.closest("rect.tip");
    if (!shape || !panel) { return; }
    svg.querySelectorAll("rect.picked").forEach(function (r) { r.classList.remove("picked"); });
    shape.classList.add("picked");
    var title = shape.querySelector("title");
    panel.textContent = title ? title.textContent : "";
  });
});
// Says the script ran (under the page's Content-Security-Policy); the tests read it.
document.documentElement.setAttribute("data-script", "ran");
