// The console's only script: a live page (the team, the inbox) follows its events (server-sent,
// drawn and escaped by the server), as `status --watch` redraws. When the stream breaks, it asks
// why: logged out (a restart logs everyone out) says so with a link to log in again; a console
// that does not answer is said too, and the stream tried again.
"use strict";

function notice(text, link) {
  let shown = document.querySelector("#live-notice");
  if (!shown) {
    shown = document.createElement("p");
    shown.id = "live-notice";
    shown.className = "error";
    shown.setAttribute("role", "alert");
    document.querySelector("main").prepend(shown);
  }
  shown.textContent = text;
  if (link) {
    const anchor = document.createElement("a");
    anchor.href = link.href;
    anchor.textContent = link.text;
    shown.append(" ", anchor);
  }
}

function follow(live) {
  const source = new EventSource(live.dataset.live);
  source.addEventListener(live.dataset.event || "team", (event) => {
    live.innerHTML = event.data; // HTML the server made, every value in it escaped
    live.dataset.updated = new Date().toISOString();
    const drawn = document.querySelector("[data-drawn] time");
    if (drawn) drawn.textContent = live.dataset.updated;
    live.classList.remove("stale");
    const shown = document.querySelector("#live-notice");
    if (shown) shown.remove();
  });
  source.onerror = async () => {
    live.classList.add("stale");
    source.close();
    let status = 0;
    try {
      status = (await fetch("/api/status", { credentials: "same-origin" })).status;
    } catch (error) {
      status = 0; // the console does not answer (stopped, restarting)
    }
    if (status === 401) {
      const back = location.pathname + location.search;
      notice("Logged out: this page is no longer updated (the console restarted, or the session was closed).",
             { href: "/login?next=" + encodeURIComponent(back), text: "Log in again" });
      return;
    }
    if (status !== 200) notice("The console does not answer: this page is no longer updated; trying again.");
    setTimeout(() => follow(live), 2000);
  };
}

document.addEventListener("DOMContentLoaded", () => {
  const live = document.querySelector("[data-live]");
  if (live) follow(live);
});
