// The calendar page (served by the calendar plugin, mounted by the console at /plugins/calendar/):
// per group, the calendars it may use and its events of the coming days. Read only.
import { html, render, useEffect, useState } from '/assets/vendor/preact-htm.js';
import { GroupSelect, usePanelGroups } from '/assets/panel-groups.js';
import { get } from '/assets/api.js';

function Calendar() {
  const [days, setDays] = useState(7);
  const [overview, setOverview] = useState(null);
  const [error, setError] = useState(null);
  const [groups, group, setGroup] = usePanelGroups(setError);

  useEffect(() => {
    if (!group) return;
    get(`./api/overview?group=${encodeURIComponent(group)}&days=${days}`).then((o) => (setOverview(o), setError(null)), (err) => setError(err.message));
  }, [group, days]);

  return html`<main class="page">
    <div class="row"><a href="/">← Console</a><h1 style="margin:0 12px">Calendar</h1>
      <${GroupSelect} groups=${groups} group=${group} setGroup=${setGroup} />
      <select id="days" value=${days} onChange=${(e) => setDays(Number(e.target.value))}>${[1, 7, 14, 31].map((d) => html`<option value=${d}>next ${d} day${d > 1 ? 's' : ''}</option>`)}</select></div>
    ${error && html`<div class="error" role="alert">${error}</div>`}
    ${overview && html`<section>
      <p>Calendars this group may use: ${overview.calendars.length ? overview.calendars.join(', ') : '(none)'} · times in ${overview.timezone}</p>
      <p class="muted">Events marked <span class="warn">external</span> (an invitation from someone else, one in a calendar others write to, or one written after a session read a mail) are external content: a session that reads them waits for you before it sends, shares or deletes anything.</p>
      <table id="events"><thead><tr><th>Start</th><th>End</th><th>Title</th><th>Calendar</th><th>Attendees</th></tr></thead>
        <tbody>${overview.events.map((e) => html`<tr><td>${e.start}</td><td>${e.end}</td><td>${e.title}${e.repeats ? ' ↻' : ''}${e.external && html` <span class="warn external" title=${e.external_why}>external</span>`}</td><td>${e.calendar}</td><td>${(e.attendees || []).join(', ')}</td></tr>`)}</tbody></table>
      ${overview.events.length === 0 && html`<p>No events.</p>`}
    </section>`}
  </main>`;
}

render(html`<${Calendar} />`, document.getElementById('calendar'));
