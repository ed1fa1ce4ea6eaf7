// Sorting, filtering and the per-task view. No dependencies, no network.
(function () {
  "use strict";
  const table = document.getElementById("leaderboard");
  const body = table.tBodies[0];
  const details = JSON.parse(document.getElementById("details").textContent);

  function sortBy(th) {
    const col = th.dataset.col;
    const ascending = th.getAttribute("aria-sort") !== "ascending";
    table.querySelectorAll("th").forEach((h) => h.setAttribute("aria-sort", "none"));
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    const key = (row) => row.querySelector(`td[data-col="${col}"]`).dataset.sort;
    const rows = Array.from(body.rows);
    rows.sort((a, b) => {
      const x = key(a), y = key(b);
      if (x === "" || y === "") return (x === "") - (y === "");  // missing values last
      const nx = Number(x), ny = Number(y);
      const order = !isNaN(nx) && !isNaN(ny) ? nx - ny : x.localeCompare(y);
      return ascending ? order : -order;
    });
    rows.forEach((row) => body.appendChild(row));
  }

  table.querySelectorAll("th[data-col]").forEach((th) => {
    th.addEventListener("click", () => sortBy(th));
    th.addEventListener("keydown", (e) => { if (e.key === "Enter") sortBy(th); });
  });

  document.getElementById("filter").addEventListener("input", (e) => {
    const words = e.target.value.toLowerCase().split(/\s+/).filter(Boolean);
    Array.from(body.rows).forEach((row) => {
      const text = row.textContent.toLowerCase();
      row.hidden = !words.every((w) => text.includes(w));
    });
  });

  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    Object.assign(node, props || {});
    children.forEach((c) => node.append(c));
    return node;
  }

  function block(title, text, cls) {
    if (!text) return [];
    return [el("h4", { textContent: title }), el("pre", { className: cls, textContent: text })];
  }

  function showSample(sample, button) {
    document.querySelectorAll("#task-list button").forEach((b) => b.classList.remove("current"));
    button.classList.add("current");
    const detail = document.getElementById("task-detail");
    detail.replaceChildren(
      el("h3", { textContent: `${sample.task_id} (sample ${sample.sample}) ` },
        el("span", { className: `verdict ${sample.verdict}`, textContent: sample.verdict })),
      ...block("Failure", sample.failure, "failure"),
      ...block("Plan", sample.plan, "plan"),
      ...block("Code", sample.code, "code"),
      el("h4", { textContent: `Model calls (${sample.calls.length})` }),
      ...sample.calls.map((call, i) => el("details", { className: "call" },
        el("summary", { textContent: `${i + 1}. ${call.role} — ${call.tokens} tokens` }),
        el("pre", { textContent: call.prompt }),
        el("pre", { textContent: call.completion }))),
    );
  }

  function openTasks(rowId) {
    body.querySelectorAll("tr").forEach((r) => r.classList.toggle("selected", r.dataset.row === rowId));
    const row = body.querySelector(`tr[data-row="${rowId}"]`);
    const cell = (c) => row.querySelector(`td[data-col="${c}"]`).textContent;
    const view = document.getElementById("task-view");
    document.getElementById("task-view-title").textContent =
      `Tasks: ${cell("benchmark")} · ${cell("system")} · ${cell("model")}`;
    const list = document.getElementById("task-list");
    list.replaceChildren();
    (details[rowId] || []).forEach((sample) => {
      const button = el("button", { type: "button", className: "task" },
        el("span", { className: `verdict ${sample.verdict}`, textContent: sample.verdict }),
        ` ${sample.task_id}` + (sample.sample ? ` #${sample.sample}` : ""));
      button.dataset.task = sample.task_id;
      button.addEventListener("click", () => showSample(sample, button));
      list.append(el("li", {}, button));
    });
    document.getElementById("task-detail").replaceChildren();
    view.hidden = false;
    const first = list.querySelector("button");
    if (first) first.click();
    view.scrollIntoView();
  }

  body.querySelectorAll("button.open-tasks").forEach((b) =>
    b.addEventListener("click", () => openTasks(b.dataset.row)));
})();
