// airlock console: the live inbox (server-sent events), client-side JSON
// checks and the "always allow" scope in words. Loaded as a file so the
// Content-Security-Policy can forbid inline script. Rows arrive as HTML
// rendered (and escaped) by the server; the scope arrives as plain text.
"use strict";

(function () {
  // setCount shows how many calls the person may decide (the badge and
  // the title count only those) and how many wait for someone else.
  function setCount(n, others) {
    var count = document.getElementById("inbox-count");
    if (count) count.textContent = String(n);
    document.title = "(" + n + ") Inbox · airlock";
    var empty = document.getElementById("inbox-empty");
    if (empty) empty.hidden = n > 0;
    var oc = document.getElementById("inbox-others-count");
    if (oc) oc.textContent = String(others);
    var section = document.getElementById("inbox-others-section");
    if (section) section.hidden = others === 0;
  }

  function rowsFrom(html) {
    var t = document.createElement("template");
    t.innerHTML = html;
    return Array.prototype.slice.call(t.content.querySelectorAll("tr.call-row"));
  }

  // A row the person may not decide is marked not-yours by the server and
  // goes to the second table.
  function liveInbox() {
    var table = document.getElementById("inbox");
    var body = document.getElementById("inbox-rows");
    var others = document.getElementById("inbox-others-rows");
    var status = document.getElementById("live-status");
    if (!table || !body || !others || !window.EventSource) return;
    var home = function (row) { return row.classList.contains("not-yours") ? others : body; };
    var count = function () { setCount(body.querySelectorAll("tr.call-row").length, others.querySelectorAll("tr.call-row").length); };
    var es = new EventSource(table.getAttribute("data-live"));
    es.addEventListener("open", function () { if (status) status.textContent = "live updates: on"; });
    es.addEventListener("error", function () { if (status) status.textContent = "live updates: reconnecting…"; });
    es.addEventListener("sync", function (e) {
      var rows = rowsFrom(e.data);
      body.replaceChildren.apply(body, rows.filter(function (r) { return home(r) === body; }));
      others.replaceChildren.apply(others, rows.filter(function (r) { return home(r) === others; }));
      count();
      table.setAttribute("data-synced", "true");
    });
    es.addEventListener("pending", function (e) {
      rowsFrom(e.data).forEach(function (row) {
        var old = document.getElementById(row.id);
        if (old) old.remove();
        home(row).prepend(row);
      });
      count();
    });
    es.addEventListener("decided", function (e) {
      var row = document.getElementById("call-" + e.data);
      if (row) row.remove();
      count();
    });
  }

  function jsonForms() {
    document.querySelectorAll("form[data-json-field]").forEach(function (form) {
      form.addEventListener("submit", function (ev) {
        var field = form.elements[form.getAttribute("data-json-field")];
        var msg = form.querySelector("[data-json-error]");
        try {
          var v = JSON.parse(field.value);
          if (v === null || typeof v !== "object" || Array.isArray(v)) throw new Error("the arguments must be a JSON object");
          if (msg) msg.hidden = true;
        } catch (err) {
          ev.preventDefault();
          if (msg) { msg.textContent = "Not valid JSON: " + err.message; msg.hidden = false; }
        }
      });
    });
  }

  // The grant form asks the server for its scope in words whenever it
  // changes, so what the reviewer reads is what the server will create.
  function grantScope() {
    var form = document.getElementById("grant-form");
    var out = document.getElementById("grant-scope");
    if (!form || !out || !window.fetch) return;
    var seq = 0;
    var update = function () {
      var mine = ++seq;
      fetch(form.getAttribute("data-scope"), { method: "POST", body: new URLSearchParams(new FormData(form)), credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.text() : Promise.reject(new Error("status " + r.status)); })
        .then(function (text) { if (mine === seq) { out.textContent = text; out.setAttribute("data-seq", String(mine)); } })
        .catch(function (err) { if (mine === seq) out.textContent = "The scope could not be worked out (" + err.message + "): it is shown again when you submit."; });
    };
    form.addEventListener("change", update);
    // The inputs that belong to a mode: typing in one chooses that mode for
    // its argument ("text matching" for a glob, "a number from" for a range).
    var modeOf = { glob_: "globmode-", min_: "rangemode-", max_: "rangemode-" };
    var modeInput = function (name) {
      for (var p in modeOf) { if (name && name.indexOf(p) === 0) return modeOf[p] + name.slice(p.length); }
      return "";
    };
    form.addEventListener("input", function (ev) { if (ev.target && modeInput(ev.target.name)) update(); });
    form.querySelectorAll("input[name^='glob_'], input[name^='min_'], input[name^='max_']").forEach(function (g) {
      g.addEventListener("focus", function () {
        var radio = document.getElementById(modeInput(g.name));
        if (radio && !radio.checked) { radio.checked = true; update(); }
      });
    });
  }

  // installable: the service worker (/sw.js) shows Web Push notifications.
  function serviceWorker() {
    if (!("serviceWorker" in navigator)) return null;
    return navigator.serviceWorker.register("/sw.js", { scope: "/" });
  }

  function keyBytes(b64) {
    var s = (b64 + "===".slice((b64.length + 3) % 4)).replace(/-/g, "+").replace(/_/g, "/");
    var raw = atob(s), out = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
    return out;
  }

  // pushOptIn subscribes this device (Devices page) and hands the
  // subscription to the console, which stores it for the signed-in person.
  function pushOptIn(registering) {
    var box = document.getElementById("push-optin"), btn = document.getElementById("push-on");
    var status = document.getElementById("push-status");
    if (!box || !btn) return;
    var say = function (t) { if (status) status.textContent = t; };
    if (!registering || !("PushManager" in window) || !("Notification" in window)) {
      btn.disabled = true;
      say("This browser cannot show notifications from a web page. On an iPhone, add airlock to the home screen and open it from there.");
      return;
    }
    btn.addEventListener("click", function () {
      btn.disabled = true;
      say("Asking this browser for permission…");
      Notification.requestPermission().then(function (perm) {
        if (perm !== "granted") throw new Error("notifications are blocked for this site: allow them in the browser's site settings");
        return registering;
      }).then(function (reg) {
        return reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: keyBytes(box.getAttribute("data-push-key")) });
      }).then(function (sub) {
        var body = sub.toJSON();
        body.device = document.getElementById("push-device").value || navigator.userAgent;
        return fetch("/api/v1/devices", {
          method: "POST", credentials: "same-origin",
          headers: { "Content-Type": "application/json", "Accept": "application/json", "X-CSRF-Token": box.getAttribute("data-csrf") },
          body: JSON.stringify(body)
        });
      }).then(function (r) {
        if (!r.ok) return r.json().then(function (e) { throw new Error(e.message || ("status " + r.status)); });
        location.reload();
      }).catch(function (err) {
        btn.disabled = false;
        say("Notifications could not be turned on: " + err.message);
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var reg = serviceWorker();
    liveInbox();
    jsonForms();
    grantScope();
    pushOptIn(reg);
  });
})();
