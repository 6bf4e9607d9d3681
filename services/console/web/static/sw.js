// airlock's service worker. It shows Web Push notifications and opens the
// call page when one is tapped. It caches nothing: every page holds a
// signed-in person's data, and the console is useless offline anyway.
"use strict";

self.addEventListener("install", function () { self.skipWaiting(); });
self.addEventListener("activate", function (event) { event.waitUntil(self.clients.claim()); });

// ownPage keeps a notification's link on this console: only the path of
// whatever URL the payload names is opened, on this worker's origin.
function ownPage(raw) {
  try {
    var u = new URL(raw, self.location.origin);
    return new URL(u.pathname + u.search, self.location.origin).href;
  } catch (e) {
    return new URL("/", self.location.origin).href;
  }
}

self.addEventListener("push", function (event) {
  var data = {};
  try { data = event.data ? event.data.json() : {}; } catch (e) { data = {}; }
  var title = typeof data.title === "string" && data.title ? data.title : "airlock: a call waits for you";
  var options = {
    body: typeof data.body === "string" ? data.body : "",
    tag: typeof data.tag === "string" ? data.tag : undefined,
    renotify: data.kind === "remind",
    icon: "/icons/icon-192.png",
    badge: "/icons/icon-192.png",
    data: { url: ownPage(typeof data.url === "string" ? data.url : "/") }
  };
  event.waitUntil(self.registration.showNotification(title, options));
});

self.addEventListener("notificationclick", function (event) {
  event.notification.close();
  var url = ownPage(event.notification.data && event.notification.data.url);
  event.waitUntil(self.clients.matchAll({ type: "window", includeUncontrolled: true }).then(function (list) {
    for (var i = 0; i < list.length; i++) {
      if (list[i].url === url && "focus" in list[i]) { return list[i].focus(); }
    }
    return self.clients.openWindow(url);
  }));
});
