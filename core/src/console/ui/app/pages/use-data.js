// A page's data: loaded on mount, reloaded on demand or when a live event says so.
import { useEffect, useState } from '/assets/vendor/preact-htm.js';
import { get, onLive } from '/assets/api.js';

export function useData(path, reloadOn = () => false) {
  const [state, setState] = useState({ data: null, error: null });
  const load = () => get(path).then((data) => setState({ data, error: null }), (err) => setState((s) => ({ data: s.data, error: err.message })));
  useEffect(() => {
    load();
    return onLive((event) => reloadOn(event) && load());
  }, [path]);
  return { ...state, reload: load };
}
