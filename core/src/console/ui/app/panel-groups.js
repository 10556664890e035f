// What every plugin panel with a group to choose shares: its own `./api/groups` loaded
// once, the first group chosen until the person picks another, and the <select> for it.
import { html, useEffect, useState } from '/assets/vendor/preact-htm.js';
import { get } from '/assets/api.js';

/** [groups, group, setGroup]; a failed load goes to `onError` with its message. */
export function usePanelGroups(onError) {
  const [groups, setGroups] = useState([]);
  const [group, setGroup] = useState('');
  useEffect(() => {
    get('./api/groups').then((g) => {
      setGroups(g.groups);
      setGroup((current) => current || g.groups[0] || '');
    }, (err) => onError(err.message));
  }, []);
  return [groups, group, setGroup];
}

export function GroupSelect({ groups, group, setGroup }) {
  return html`<select id="group" value=${group} onChange=${(e) => setGroup(e.target.value)}>${groups.map((g) => html`<option value=${g}>${g}</option>`)}</select>`;
}
