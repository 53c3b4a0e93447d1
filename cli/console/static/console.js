// The console's only script. A live page (the team, the inbox) follows its events (server-sent,
// drawn and escaped by the server), as `status --watch` redraws. When the stream breaks or ends,
// it asks why: logged out (a restart, or a logout in another tab) says so with a link to log in
// again; a console that does not answer is said too, and the stream tried again.
// On an answer form: a live count under the text boxes, the draft kept in this tab (so a session
// that ended meanwhile loses nothing), and a watch on the inbox: answered or replaced elsewhere,
// the form says so and takes nothing more.
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

// Follow the events at `url` named `name`, each given to `onData`; `stale` is marked while
// the stream is broken.
function follow(url, name, onData, stale) {
  const source = new EventSource(url);
  let ended = false;
  source.addEventListener(name, (event) => {
    onData(event.data);
    if (stale) stale.classList.remove("stale");
    const shown = document.querySelector("#live-notice");
    if (shown && shown.dataset.kept !== "1") shown.remove();
  });
  source.onerror = async () => {
    if (ended) return;
    ended = true;
    if (stale) stale.classList.add("stale");
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
    setTimeout(() => follow(url, name, onData, stale), 2000);
  };
}

function followLive(live) {
  follow(live.dataset.live, live.dataset.event || "team", (data) => {
    live.innerHTML = data; // HTML the server made, every value in it escaped
    live.dataset.updated = new Date().toISOString();
    const drawn = document.querySelector("[data-drawn] time");
    if (drawn) drawn.textContent = live.dataset.updated;
  }, live);
}

// The answer form's question no longer waits: say so, and take nothing more.
function questionGone(form) {
  if (form.dataset.gone === "1") return;
  form.dataset.gone = "1";
  for (const field of form.querySelectorAll("input, select, textarea, button")) field.disabled = true;
  notice("This question was answered or replaced elsewhere (another tab, another person, the CLI): " +
         "this form records nothing now.", { href: location.pathname + location.search, text: "Reload" });
  document.querySelector("#live-notice").dataset.kept = "1";
}

function watchQuestion(form) {
  follow("/events/inbox", "inbox", (data) => {
    const drawn = document.createElement("template"); // inert: nothing in it runs
    drawn.innerHTML = data;
    const still = [...drawn.content.querySelectorAll("[data-envelope]")]
      .some((link) => link.dataset.envelope === form.dataset.envelope);
    if (!still) questionGone(form);
  }, null);
}

function bytesAsJson(text) {
  return text ? new TextEncoder().encode(JSON.stringify(text)).length : 0;
}

function keepCount(form) {
  for (const count of form.querySelectorAll("[data-count]")) {
    const box = form.querySelector(`textarea[name="${count.dataset.count}"]`);
    const most = Number(count.dataset.most);
    const unit = count.dataset.unit;
    const show = () => {
      const used = unit === "characters" ? [...box.value].length : bytesAsJson(box.value);
      const over = used - most;
      count.textContent = `${used.toLocaleString("en")} / ${most.toLocaleString("en")} ${unit}` +
        (over > 0 ? `: ${over.toLocaleString("en")} too many, so the answer would be refused` : "");
      count.classList.toggle("over", over > 0);
    };
    box.addEventListener("input", show);
    show();
  }
}

// The draft of an answer, kept in this tab under the envelope it answers: back after a login
// (the session ended before it was sent), or after a reload, the form has it again.
function keepDraft(form) {
  const key = "answer:" + form.dataset.envelope;
  const fields = [...form.querySelectorAll("select, textarea")];
  const saved = JSON.parse(sessionStorage.getItem(key) || "null");
  const empty = fields.every((field) => !field.value);
  if (saved && empty) {
    for (const field of fields) if (saved[field.name] !== undefined) field.value = saved[field.name];
  }
  form.addEventListener("input", () => {
    const draft = {};
    for (const field of fields) draft[field.name] = field.value;
    sessionStorage.setItem(key, JSON.stringify(draft));
  });
}

document.addEventListener("DOMContentLoaded", () => {
  const live = document.querySelector("[data-live]");
  if (live) followLive(live);
  const answered = document.querySelector("[data-answered]");
  if (answered) sessionStorage.removeItem("answer:" + answered.dataset.answered);
  const form = document.querySelector("form.answer[data-envelope]");
  if (form) {
    keepDraft(form);
    keepCount(form);
    watchQuestion(form);
  }
});
