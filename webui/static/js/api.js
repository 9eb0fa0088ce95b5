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

// api calls the server. body may be an object (sent as JSON) or a string
// (sent as is).
export async function api(path, { method = 'GET', body, query } = {}) {
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
  const res = await fetch(path, { method, headers, body, credentials: 'same-origin', cache: 'no-store' });
  if (res.status === 204) return null;
  let data = null;
  try { data = await res.json(); } catch { /* not JSON */ }
  if (!res.ok) {
    throw new ApiError(res.status, (data && data.error) || `${res.status} ${res.statusText}`, data && data.errors);
  }
  return data;
}
