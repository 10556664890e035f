// The Tasks page (served by the tasks plugin, mounted by the console at /plugins/tasks/):
// per group, what is scheduled and when it runs next; tasks a session scheduled after
// reading external content are marked, since their prompts may carry a stranger's words.
import { html, render, useEffect, useState } from '/assets/vendor/preact-htm.js';
import { GroupSelect, usePanelGroups } from '/assets/panel-groups.js';
import { get, when } from '/assets/api.js';

function Tasks() {
  const [data, setData] = useState(null);
  const [error, setError] = useState(null);
  const [groups, group, setGroup] = usePanelGroups(setError);

  useEffect(() => {
    if (group) get(`./api/tasks?group=${encodeURIComponent(group)}`).then((d) => (setData(d), setError(null)), (err) => setError(err.message));
  }, [group]);

  const tasks = data?.tasks ?? [];
  return html`<main class="page">
    <div class="row"><a href="/">← Console</a><h1 style="margin:0 12px">Tasks</h1>
      <${GroupSelect} groups=${groups} group=${group} setGroup=${setGroup} /></div>
    ${error && html`<div class="error" role="alert">${error}</div>`}
    ${groups.length === 0 && html`<p class="muted">No group has a scheduled task.</p>`}
    ${tasks.some((t) => t.external) && html`<p class="warn external-note">Tasks marked <strong>after external content</strong> were scheduled by a session that had read text from outside (a mail): their prompts may repeat what a stranger wrote, and when they run, anything they would send, share or delete waits for you.</p>`}
    <table id="task-list"><thead><tr><th>Task</th><th>Schedule</th><th>Next run</th><th>Prompt</th><th>Status</th></tr></thead><tbody>
      ${tasks.map((t) => html`<tr data-id=${t.task_id} data-external=${t.external ? 'yes' : 'no'}>
        <td class="mono">${t.task_id}${t.source === 'config' ? html` <span class="muted">(configured)</span>` : ''}${t.external ? html` <span class="warn external">after external content</span>` : ''}</td>
        <td class="mono">${t.schedule}${data.timezone ? html` <span class="muted">${data.timezone}</span>` : ''}</td>
        <td>${t.next_run ? when(t.next_run) : '—'}</td>
        <td><pre>${t.prompt}</pre></td>
        <td>${t.status}${t.last_error ? html`<div class="muted">${t.last_error}</div>` : ''}</td></tr>`)}
    </tbody></table>
  </main>`;
}

render(html`<${Tasks} />`, document.getElementById('tasks'));
