// The console's script. Pages work without it; with it they stay live and act in place:
// - each page follows its own Server-Sent Events (body[data-feed]): a conversation's or a
//   repo's live stream (console/live.py), or the instance's notices; the browser resumes it
//   after a drop with Last-Event-ID, and every item carries an id, so nothing shows twice;
// - items (history entries, events, open cards, timeline entries) are HTML the server made
//   with the page's own functions, put where they belong;
// - actions (message, stop, move, open) are confirmed in place and sent with fetch, and
//   their result is shown beside them;
// - times read "3 minutes ago" and keep doing so, with the exact time on hover.
(function () {
  "use strict";
  var body = document.body;
  var feed = body.getAttribute("data-feed");
  var statusLine = document.getElementById("live-status");

  function arrived(node) {
    node.classList.add("arrived");
    window.setTimeout(function () { node.classList.remove("arrived"); }, 2500);
  }

  function fromHtml(html) {
    var box = document.createElement("template");
    box.innerHTML = html.trim();
    return box.content;
  }

  function say(text, state) {
    if (!statusLine) return;
    statusLine.textContent = text;
    statusLine.className = "live-status " + state;
  }

  // -- relative times --------------------------------------------------------------------
  function relative(then, now) {
    var seconds = Math.floor((now - then) / 1000);
    if (seconds < 0) return "in the future";
    var units = [["day", 86400], ["hour", 3600], ["minute", 60]];
    for (var i = 0; i < units.length; i++) {
      if (seconds >= units[i][1]) {
        var n = Math.floor(seconds / units[i][1]);
        return n + " " + units[i][0] + (n === 1 ? "" : "s") + " ago";
      }
    }
    return seconds < 5 ? "just now" : seconds + " seconds ago";
  }
  function refreshTimes(root) {
    var now = Date.now();
    (root || document).querySelectorAll("time[datetime]").forEach(function (t) {
      var then = Date.parse(t.getAttribute("datetime"));
      if (!isNaN(then)) t.textContent = relative(then, now);
    });
  }
  window.setInterval(refreshTimes, 30000);

  // -- notices at the top of every page ----------------------------------------------------
  var banner = document.getElementById("live-notices");
  var shownNotices = {};
  function showNotice(id, text) {
    if (!banner || !text || (id && shownNotices[id])) return;
    if (id) shownNotices[id] = true;
    var line = document.createElement("p");
    line.className = "notice warning live";
    line.textContent = text;
    banner.insertBefore(line, banner.firstChild);
    while (banner.children.length > 5) banner.removeChild(banner.lastChild);
  }

  // -- a conversation's history ------------------------------------------------------------
  function keepOpen(before, after) {
    // A fold the person opened stays open when its item is shown again.
    var was = before.querySelectorAll("details");
    var now = after.querySelectorAll ? after.querySelectorAll("details") : [];
    for (var i = 0; i < was.length && i < now.length; i++) {
      if (was[i].open) now[i].open = true;
    }
  }
  function placeItem(data) {
    var list = document.querySelector("ol.history");
    if (!list) return;
    var empty = document.getElementById("nothing-yet");
    if (empty) empty.remove();
    var made = replacedOrNew(data);
    if (!made) return;
    arrived(made);
    var items = list.children;
    for (var i = 0; i < items.length; i++) {
      if ((items[i].getAttribute("data-key") || "") > data.key) {
        list.insertBefore(made, items[i]);
        return;
      }
    }
    list.appendChild(made);
  }
  function showState(state) {
    var badge = document.getElementById("state");
    if (badge) {
      badge.textContent = state;
      badge.className = "state state-" + state;
    }
    document.querySelectorAll("[data-when]").forEach(function (form) {
      form.hidden = form.getAttribute("data-when").split(" ").indexOf(state) < 0;
    });
  }

  // -- a repo's timeline ---------------------------------------------------------------------
  function conversationBefore(node) {
    var at = node ? node.previousElementSibling : null;
    while (at && !at.hasAttribute("data-conversation")) at = at.previousElementSibling;
    return at ? at.getAttribute("data-conversation") : null;
  }
  function insertWithBoundary(parent, made, boundaryHtml, conversation, before) {
    var previous = before ? conversationBefore(before) : null;
    if (!before) {
      var last = parent.lastElementChild;
      while (last && !last.hasAttribute("data-conversation")) last = last.previousElementSibling;
      previous = last ? last.getAttribute("data-conversation") : null;
    }
    if (previous !== conversation) {
      parent.insertBefore(fromHtml(boundaryHtml), before || null);
    }
    parent.insertBefore(made, before || null);
  }
  function placeEntry(data) {
    var timeline = document.getElementById("timeline");
    if (!timeline || document.getElementById(data.id)) return;
    var empty = timeline.querySelector("p.empty");
    if (empty) empty.remove();
    var made = fromHtml(data.html).firstElementChild;
    if (!made) return;
    arrived(made);
    insertWithBoundary(timeline, made, data.boundary, data.session_id, null);
  }
  // The item the page already shows under this id is replaced in place (its folds kept
  // open); an item it does not show yet is returned, for its caller to put in place.
  function replacedOrNew(data) {
    var made = fromHtml(data.html).firstElementChild;
    if (!made) return null;
    var old = document.getElementById(data.id);
    if (!old) return made;
    keepOpen(old, made);
    old.replaceWith(made);
    return null;
  }
  function placeOpen(data) {
    var timeline = document.getElementById("timeline");
    if (!timeline) return;
    var made = replacedOrNew(data);
    if (!made) return;
    var empty = timeline.querySelector("p.empty");
    if (empty) empty.remove();
    arrived(made);
    var later = null;
    var entries = timeline.querySelectorAll(".entry[data-seq]");
    for (var i = 0; i < entries.length; i++) {
      if (Number(entries[i].getAttribute("data-seq")) > data.until) {
        later = entries[i];
        break;
      }
    }
    insertWithBoundary(timeline, made, data.boundary, data.session_id, later);
  }

  // -- the page's stream -----------------------------------------------------------------------
  function follow() {
    if (!feed || !window.EventSource) return;
    var source = new EventSource(feed);
    function json(handler) {
      return function (event) {
        var data;
        try { data = JSON.parse(event.data); } catch (e) { return; }
        handler(data, event);
        refreshTimes();
      };
    }
    source.onopen = function () { say("live", "on"); };
    source.onerror = function () {
      say(source.readyState === EventSource.CLOSED ? "not live: reload the page" :
          "reconnecting…", "off");
    };
    source.addEventListener("notice", json(function (data) { showNotice(data.id, data.text); }));
    source.addEventListener("item", json(placeItem));
    source.addEventListener("state", json(function (data) { showState(data.state); }));
    source.addEventListener("entry", json(placeEntry));
    source.addEventListener("open", json(placeOpen));
    // The instance's notices stream (pages without a live stream of their own).
    ["stopped_idle", "runner_offline", "runner_restarted", "not_woken", "resume_lost"]
      .forEach(function (kind) {
        source.addEventListener(kind, json(function (data, event) {
          showNotice(event.lastEventId, data.text || data.kind);
        }));
      });
  }

  // -- actions, confirmed and sent in place --------------------------------------------------
  function resultBox(form) {
    var section = form.closest("section");
    return section ? section.querySelector(".action-result, #action-result") : null;
  }
  function send(form) {
    var data = new URLSearchParams(new FormData(form));
    data.set("confirm", "yes");
    var button = form.querySelector("button[type=submit]");
    var box = resultBox(form);
    if (button) button.disabled = true;
    if (box) { box.textContent = "Working…"; box.className = box.className.replace(/ ?(ok|problem)/g, ""); }
    fetch(form.action, {method: "POST", body: data, credentials: "same-origin",
                        headers: {"Accept": "application/json"}})
      .then(function (reply) {
        return reply.json().catch(function () {
          return {ok: false, error: {message: "The console answered something unreadable (" +
                                     reply.status + "); reload the page."}};
        });
      })
      .then(function (answer) {
        if (!box) return;
        box.textContent = answer.ok ? answer.message : answer.error.message;
        box.classList.add(answer.ok ? "ok" : "problem");
        var here = location.pathname + location.search;
        if (answer.ok && answer.link && answer.link !== here) {
          var link = document.createElement("a");
          link.href = answer.link;
          link.textContent = " Go to conversation " + answer.session_id;
          box.appendChild(link);
        }
        if (answer.ok) {
          var text = form.querySelector("textarea");
          if (text) text.value = "";
        }
      })
      .catch(function () {
        if (box) {
          box.textContent = "The console could not be reached; nothing was sent. Try again.";
          box.classList.add("problem");
        }
      })
      .then(function () { if (button) button.disabled = false; });
  }
  function askFirst(form) {
    var old = form.querySelector(".confirm-inline");
    if (old) return;
    var ask = document.createElement("div");
    ask.className = "confirm-inline";
    ask.setAttribute("role", "alertdialog");
    var question = document.createElement("p");
    question.className = "question";
    question.textContent = form.getAttribute("data-confirm");
    var yes = document.createElement("button");
    yes.type = "button";
    yes.className = "danger";
    yes.textContent = "Yes, do it";
    var no = document.createElement("button");
    no.type = "button";
    no.textContent = "Cancel";
    yes.addEventListener("click", function () { ask.remove(); send(form); });
    no.addEventListener("click", function () { ask.remove(); });
    ask.appendChild(question);
    ask.appendChild(yes);
    ask.appendChild(no);
    form.appendChild(ask);
    yes.focus();
  }
  document.querySelectorAll("form.action").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      if (!window.fetch) return;  // the confirmation page does it
      event.preventDefault();
      if (form.hasAttribute("data-confirm")) askFirst(form); else send(form);
    });
  });

  refreshTimes();
  follow();
})();
