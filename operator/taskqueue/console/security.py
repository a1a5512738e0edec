"""The console's web safety, one place: response headers (a Content-Security-Policy without
inline scripts or styles, no framing, no sniffing, no referrer) and CSRF protection of every
action (a double-submit token: a random cookie, SameSite=Strict and HttpOnly, repeated in each
form; and the request's Origin, or its Referer, must be this server).

Pure helpers (`same_origin`, `token_ok`) and one aiohttp middleware.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from aiohttp import web

SECURE_COOKIES = web.AppKey("secure_cookies", bool)
"""`--secure-cookies`: the pages are served over HTTPS by a proxy in front (a TLS-terminating
Ingress) though the console sees plain HTTP."""
CSRF_COOKIE = "tq_csrf"
CSRF_FIELD = "csrf"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def same_origin(*, origin: str | None, referer: str | None, host: str, scheme: str) -> bool:
    """True when the request comes from a page of this server: its Origin header, else its
    Referer, names `scheme://host`. Neither header: refused (browsers send Origin on POST)."""
    source = origin if origin and origin != "null" else referer
    if not source:
        return False
    parts = urlsplit(source)
    return parts.scheme == scheme and parts.netloc == host


def token_ok(*, cookie: str | None, field: str | None) -> bool:
    """True when the form repeats the cookie's token (compared in constant time)."""
    return bool(cookie) and bool(field) and hmac.compare_digest(str(cookie), str(field))


def cookies_secure(request: web.Request) -> bool:
    """Whether cookies are marked Secure: the request is HTTPS, or the console was told
    (`--secure-cookies`) that a proxy in front serves its pages over HTTPS."""
    return request.secure or request.app.get(SECURE_COOKIES, False)


def token(request: web.Request) -> str:
    """This viewer's CSRF token: the cookie's, or a new one `headers` sets."""
    current = request.cookies.get(CSRF_COOKIE)
    if current and len(current) >= 32:
        return current
    fresh: str = request.setdefault("csrf_new", secrets.token_urlsafe(32))
    return fresh


async def check_form(request: web.Request) -> dict[str, str]:
    """The posted form, after the CSRF checks; HTTP 403 when they fail."""
    form = await request.post()
    origin, referer = request.headers.get("Origin"), request.headers.get("Referer")
    # behind a TLS-terminating proxy the page is https:// though this request is plain HTTP
    schemes = {request.scheme, "https"} if request.app.get(SECURE_COOKIES, False) else {
        request.scheme}
    if not any(same_origin(origin=origin, referer=referer, host=request.host, scheme=scheme)
               for scheme in schemes):
        raise web.HTTPForbidden(text="refused: the request does not come from this console")
    if not token_ok(cookie=request.cookies.get(CSRF_COOKIE), field=str(form.get(CSRF_FIELD, ""))):
        raise web.HTTPForbidden(text="refused: the form's CSRF token is missing or stale; "
                                     "reload the page")
    return {k: str(v) for k, v in form.items()}


@web.middleware
async def headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The safety headers on every response, and the CSRF cookie when a page made one."""
    response: web.StreamResponse
    try:
        response = await handler(request)
    except web.HTTPException as exc:  # a redirect or a refusal: answered as a plain response
        response = web.Response(status=exc.status, text=exc.text, headers=exc.headers)
    response.headers.update(HEADERS)
    fresh = request.get("csrf_new")
    if fresh:
        response.set_cookie(CSRF_COOKIE, fresh, httponly=True, samesite="Strict", path="/",
                            secure=cookies_secure(request))
    return response
