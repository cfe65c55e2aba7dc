// podsafe report: progressive enhancement only; the page reads without it.
(function () {
  "use strict";
  var body = document.body;
  // Guarantees: hide the ones this run did not judge, unless asked.
  var box = document.getElementById("show-unjudged");
  if (box) {
    body.classList.add("hide-unjudged");
    box.addEventListener("change", function () { body.classList.toggle("hide-unjudged", !box.checked); });
  }
  // A time cursor over each chart, reading the time under the mouse.
  function cursor(boxEl) {
    var svg = boxEl.querySelector("svg");
    var line = boxEl.querySelector(".cursor");
    if (!svg || !line) { return 0; }
    var vb = svg.viewBox.baseVal, left = 170, right = 10;
    var end = Number(document.body.getAttribute("data-end-ns") || "0");
    var label = document.createElement("span");
    line.appendChild(label);
    svg.addEventListener("mousemove", function (ev) {
      var r = svg.getBoundingClientRect();
      var x = (ev.clientX - r.left) * vb.width / r.width;
      if (x < left || x > vb.width - right || !end) { line.hidden = true; return; }
      var t = (x - left) / (vb.width - left - right) * end / 1e9;
      line.hidden = false;
      line.style.left = (ev.clientX - boxEl.getBoundingClientRect().left + boxEl.scrollLeft) + "px";
      label.textContent = t.toFixed(2) + "s";
    });
    svg.addEventListener("mouseleave", function () { line.hidden = true; });
    return svg.querySelectorAll("rect").length;
  }
  // Gantt: hovering a run highlights every run of the same pod UID.
  var gantt = document.getElementById("gantt-box");
  if (gantt) {
    cursor(gantt);
    var runs = gantt.querySelectorAll("rect.run");
    gantt.addEventListener("mouseover", function (ev) {
      var key = ev.target.getAttribute && ev.target.getAttribute("data-key");
      if (!key) { return; }
      for (var i = 0; i < runs.length; i++) {
        var same = runs[i].getAttribute("data-key") === key;
        runs[i].classList.toggle("hl", same);
        runs[i].classList.toggle("dim", !same);
      }
    });
    gantt.addEventListener("mouseout", function () {
      for (var i = 0; i < runs.length; i++) { runs[i].classList.remove("hl", "dim"); }
    });
  }
  // The timeline: mark it rendered once its chart is in place.
  var tl = document.getElementById("timeline-box");
  if (tl) {
    var shapes = cursor(tl);
    var bands = tl.querySelectorAll("rect.fault").length;
    tl.setAttribute("data-bands", String(bands));
    tl.setAttribute("data-rendered", shapes > 0 || tl.querySelector("svg") ? "1" : "0");
  }
})();
