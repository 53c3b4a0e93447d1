// The console's only script: the team page follows its live events (server-sent, drawn and
// escaped by the server), as `status --watch` redraws.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const team = document.querySelector("[data-live]");
  if (!team) return;
  const source = new EventSource(team.dataset.live);
  source.addEventListener("team", (event) => {
    team.innerHTML = event.data; // HTML the server made, every value in it escaped
    team.dataset.updated = new Date().toISOString();
  });
  source.onerror = () => { team.classList.add("stale"); };
  source.onopen = () => { team.classList.remove("stale"); };
});
