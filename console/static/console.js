// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// fsbroker console's one script: it keeps the page up to date from the
// console's event stream (Server-Sent Events). Every fragment it puts in the
// page was rendered, and escaped, by the console (html/template).
'use strict';

(() => {
  const page = document.body;
  const view = page.dataset.view;
  const badge = document.getElementById('pending-count');

  // The stream of this view, with the page's filters (activity).
  const params = new URLSearchParams();
  const here = new URLSearchParams(location.search);
  for (const name of ['server', 'method', 'path', 'result', 'digest']) {
    if (here.has(name)) {
      params.set(name, here.get(name));
    }
  }
  params.set('view', view);
  if (view === 'activity') {
    params.set('after', page.dataset.after || '0');
  }
  const events = new EventSource('events?' + params.toString());

  events.addEventListener('pending', (e) => {
    badge.textContent = e.data;
    badge.classList.toggle('waiting', e.data !== '0');
  });
  events.addEventListener('consent', (e) => mergeRequests(e.data));
  events.addEventListener('grants', (e) => {
    const tables = document.getElementById('grants-tables');
    if (tables) {
      tables.innerHTML = e.data;
    }
  });
  events.addEventListener('activity', (e) => addRow(e.data));

  // fragment parses HTML the console rendered.
  function fragment(html) {
    const t = document.createElement('template');
    t.innerHTML = html;
    return t.content;
  }

  // mergeRequests updates the consent list: requests no longer waiting go,
  // new ones are added at the end; those still shown stay as they are, with
  // what the person ticked in them.
  function mergeRequests(html) {
    const list = document.getElementById('consent-list');
    if (!list) {
      return;
    }
    const next = fragment(html);
    const waiting = new Set(Array.from(next.querySelectorAll('section.request'), (s) => s.id));
    for (const s of list.querySelectorAll('section.request')) {
      if (!waiting.has(s.id)) {
        s.remove();
      }
    }
    for (const s of Array.from(next.querySelectorAll('section.request'))) {
      if (!document.getElementById(s.id)) {
        list.appendChild(s);
      }
    }
    const empty = list.querySelector('p.empty');
    if (list.querySelector('section.request')) {
      if (empty) {
        empty.remove();
      }
    } else if (!empty) {
      const e = next.querySelector('p.empty');
      if (e) {
        list.appendChild(e);
      }
    }
    countdown();
  }

  // addRow puts a new record at the top of the activity table.
  function addRow(html) {
    const rows = document.getElementById('activity-rows');
    if (!rows) {
      return;
    }
    const row = fragment(html).firstElementChild;
    if (!row) {
      return;
    }
    row.classList.add('new');
    rows.prepend(row);
    while (rows.rows.length > 500) {
      rows.deleteRow(-1);
    }
    const empty = document.getElementById('activity-empty');
    if (empty) {
      empty.remove();
    }
  }

  // countdown says how long each waiting broker still waits.
  function countdown() {
    for (const c of document.querySelectorAll('.countdown')) {
      const left = Math.max(0, Math.round((Date.parse(c.dataset.deadline) - Date.now()) / 1000));
      c.textContent = '(' + left + ' s left)';
    }
  }
  countdown();
  setInterval(countdown, 1000);
})();
