// JSON API client: every mutation carries the CSRF header; errors become
// ApiError with the server's message and field errors.

export const CSRF_HEADER = 'X-E1kbox-CSRF';

export class ApiError extends Error {
  constructor(status, message, errors) {
    super(message);
    this.status = status;
    this.errors = errors || [];
  }
}

// url resolves a path against the page's origin. Not against the page's
// URL: a page opened as http://gokrazy:PASSWORD@box:8080/ has credentials
// in its URL, and fetch() refuses every URL that carries them (relative
// URLs inherit them); the browser still sends the credentials it cached.
export function url(path) {
  return new URL(path, location.origin).href;
}

// request builds fetch's arguments for a call of api().
function request(path, { method = 'GET', body, query } = {}) {
  const headers = { Accept: 'application/json' };
  if (method !== 'GET' && method !== 'HEAD') headers[CSRF_HEADER] = '1';
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    if (typeof body !== 'string') body = JSON.stringify(body);
  }
  if (query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== '' && v !== null && v !== undefined) q.set(k, v);
    const s = q.toString();
    if (s) path += `?${s}`;
  }
  return [url(path), { method, headers, body, credentials: 'same-origin', cache: 'no-store' }];
}

async function failure(res) {
  let data = null;
  try { data = await res.json(); } catch { /* not JSON */ }
  return new ApiError(res.status, (data && data.error) || `${res.status} ${res.statusText}`, data && data.errors);
}

// api calls the server. body may be an object (sent as JSON) or a string
// (sent as is).
export async function api(path, opts = {}) {
  const res = await fetch(...request(path, opts));
  if (res.status === 204) return null;
  let data = null;
  try { data = await res.json(); } catch { /* not JSON */ }
  if (!res.ok) {
    throw new ApiError(res.status, (data && data.error) || `${res.status} ${res.statusText}`, data && data.errors);
  }
  return data;
}

// apiLines calls an endpoint that streams one JSON object per line and
// calls onLine for each; signal aborts it.
export async function apiLines(path, body, onLine, signal) {
  const [u, init] = request(path, { method: 'POST', body });
  const res = await fetch(u, { ...init, signal });
  if (!res.ok) throw await failure(res);
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 1);
      if (line) onLine(JSON.parse(line));
    }
  }
}

// apiBlob calls an endpoint that answers with a file.
export async function apiBlob(path, body, signal) {
  const [u, init] = request(path, { method: 'POST', body });
  const res = await fetch(u, { ...init, signal });
  if (!res.ok) throw await failure(res);
  const name = /filename="([^"]+)"/.exec(res.headers.get('Content-Disposition') || '');
  return { blob: await res.blob(), name: name ? name[1] : 'download' };
}
