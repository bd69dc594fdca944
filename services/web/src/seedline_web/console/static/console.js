// The console's live notices: its own Server-Sent Events stream (the login's cookie),
// shown at the top of every page as they come. A notice about the conversation on the
// page reloads it, so its history shows what just happened.
(function () {
  "use strict";
  var box = document.getElementById("live-notices");
  if (!box || !window.EventSource) return;
  var history = document.getElementById("history");
  var here = history ? history.getAttribute("data-conversation") : null;
  var source = new EventSource("/console/notifications");
  function show(event) {
    var notice;
    try { notice = JSON.parse(event.data); } catch (e) { return; }
    var line = document.createElement("p");
    line.className = "notice warning live";
    line.textContent = notice.text || notice.kind || "";
    box.insertBefore(line, box.firstChild);
    if (here && notice.session_id === here) {
      window.setTimeout(function () { window.location.reload(); }, 500);
    }
  }
  ["stopped_idle", "runner_offline", "runner_restarted", "not_woken", "resume_lost", "notice"]
    .forEach(function (kind) { source.addEventListener(kind, show); });
  source.onmessage = show;
})();
