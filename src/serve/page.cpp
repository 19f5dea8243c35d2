#include "serve/page.h"

namespace rlx::serve {

const std::string& page_html() {
  static const std::string kPage = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>rlx serve</title>
<style>
  body { font-family: system-ui, sans-serif; max-width: 60em; margin: 1em auto; padding: 0 1em; }
  textarea, input[type=text] { width: 100%; box-sizing: border-box; font: inherit; }
  table { border-collapse: collapse; margin-top: .5em; }
  td, th { border: 1px solid #ccc; padding: .2em .5em; text-align: right; font-variant-numeric: tabular-nums; }
  th { background: #f4f4f4; max-width: 14em; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
  #chat-log div { margin: .3em 0; white-space: pre-wrap; }
  .user { color: #225; font-weight: bold; } .error { color: #a00; }
  section { margin-bottom: 2em; }
</style>
</head>
<body>
<h1>rlx serve</h1>
<section>
  <h2>Sentence similarity</h2>
  <label>model <select id="embed-model"></select></label>
  <p><textarea id="sentences" rows="5" placeholder="one sentence per line"></textarea></p>
  <button id="embed-btn">Compare</button> <span id="embed-status"></span>
  <table id="matrix"></table>
</section>
<section>
  <h2>Chat</h2>
  <label>model <select id="chat-model"></select></label>
  <div id="chat-log"></div>
  <p><input type="text" id="chat-input" placeholder="say something"></p>
  <button id="chat-send">Send</button> <span id="chat-status"></span>
</section>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const history = [];

async function loadModels() {
  const r = await fetch("/v1/models");
  const j = await r.json();
  for (const m of j.data) {
    const o = document.createElement("option");
    o.value = o.textContent = m.id;
    $(m.kind === "embedding" ? "embed-model" : "chat-model").appendChild(o);
  }
  document.body.dataset.ready = "1";
}

function cosine(a, b) {
  let d = 0, na = 0, nb = 0;
  for (let k = 0; k < a.length; ++k) { d += a[k] * b[k]; na += a[k] * a[k]; nb += b[k] * b[k]; }
  return d / Math.max(Math.sqrt(na * nb), 1e-12);
}

async function compare() {
  const lines = $("sentences").value.split("\n").map((s) => s.trim()).filter((s) => s.length);
  const table = $("matrix");
  table.innerHTML = "";
  delete document.body.dataset.embedDone;
  if (!lines.length) { $("embed-status").textContent = "type some sentences first"; return; }
  $("embed-status").textContent = "embedding…";
  const r = await fetch("/v1/embeddings", {method: "POST", headers: {"Content-Type": "application/json"},
    body: JSON.stringify({model: $("embed-model").value, input: lines, encoding_format: "float"})});
  const j = await r.json();
  if (!r.ok) { $("embed-status").textContent = j.error.message; $("embed-status").className = "error"; return; }
  const e = j.data.map((d) => d.embedding);
  const head = table.insertRow();
  head.appendChild(document.createElement("th"));
  lines.forEach((s) => { const th = document.createElement("th"); th.textContent = s; th.title = s; head.appendChild(th); });
  lines.forEach((s, i) => {
    const row = table.insertRow();
    const th = document.createElement("th"); th.textContent = s; th.title = s; row.appendChild(th);
    lines.forEach((_, k) => {
      const c = row.insertCell();
      const v = cosine(e[i], e[k]);
      c.textContent = v.toFixed(3);
      c.dataset.i = i; c.dataset.j = k;
      c.style.background = `rgba(40, 120, 220, ${Math.max(0, v) * 0.5})`;
    });
  });
  $("embed-status").textContent = `${lines.length} sentences, ${j.usage.prompt_tokens} tokens`;
  document.body.dataset.embedDone = "1";
}

async function send() {
  const text = $("chat-input").value.trim();
  if (!text) return;
  delete document.body.dataset.chatDone;
  $("chat-input").value = "";
  const log = $("chat-log");
  const u = document.createElement("div"); u.className = "user"; u.textContent = text; log.appendChild(u);
  const a = document.createElement("div"); a.className = "assistant"; log.appendChild(a);
  history.push({role: "user", content: text});
  $("chat-status").textContent = "…";
  const r = await fetch("/v1/chat/completions", {method: "POST", headers: {"Content-Type": "application/json"},
    body: JSON.stringify({model: $("chat-model").value, messages: history, stream: true, max_tokens: 64, temperature: 0})});
  if (!r.ok) { const j = await r.json(); a.className = "error"; a.textContent = j.error.message; return; }
  const reader = r.body.getReader(), dec = new TextDecoder();
  let buf = "", pieces = 0;
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buf += dec.decode(value, {stream: true});
    let cut;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const ev = buf.slice(0, cut); buf = buf.slice(cut + 2);
      if (!ev.startsWith("data: ")) continue;
      const data = ev.slice(6);
      if (data === "[DONE]") continue;
      const j = JSON.parse(data);
      const delta = j.choices && j.choices[0] && j.choices[0].delta;
      if (delta && delta.content) { a.textContent += delta.content; ++pieces; }
    }
  }
  history.push({role: "assistant", content: a.textContent});
  $("chat-status").textContent = `${pieces} pieces streamed`;
  document.body.dataset.chatPieces = String(pieces);
  document.body.dataset.chatDone = "1";
}

$("embed-btn").addEventListener("click", compare);
$("chat-send").addEventListener("click", send);
$("chat-input").addEventListener("keydown", (ev) => { if (ev.key === "Enter") send(); });
loadModels();
</script>
</body>
</html>
)HTML";
  return kPage;
}

}  // namespace rlx::serve
