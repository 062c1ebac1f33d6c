"""The web console: static pages served by every gateway at ``/``, built on the gateway's own
admin REST API and WebSocket API.

Everything it needs is inside the package (``static/``: HTML, CSS and ES modules, no build
step and nothing fetched from another origin), so it works offline and through any load
balancer in front of the fleet: the page talks only to the origin that served it. The
``Content-Security-Policy`` header says so to the browser too: scripts, styles, images and
connections from this origin only.

Paths: ``GET /`` the page; ``GET /console/{file}`` its files. Both are open to everyone
(``auth.requirement``): the page holds no data, and every call it makes is authenticated
and authorized like any other client's, with the token the user gives it.
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

__all__ = ["PREFIX", "STATIC", "add_routes", "is_console_path"]

#: Where the console's files are served from.
PREFIX = "/console"
#: The console's files in the package.
STATIC = Path(__file__).resolve().parent / "static"

_POLICY = (
    "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; "
    "style-src 'self'; script-src 'self'; frame-ancestors 'none'"
)
_HEADERS = {
    "Content-Security-Policy": _POLICY,
    "X-Content-Type-Options": "nosniff",
    # a gateway upgraded in place serves its new files at once
    "Cache-Control": "no-cache",
}


def is_console_path(path: str) -> bool:
    """Whether ``path`` (as sent) is one of the console's: open to everyone, and not part of
    the admin API's description."""
    return path in ("", "/") or path == PREFIX or path.startswith(PREFIX + "/")


async def index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html", headers=_HEADERS)


async def static_file(request: web.Request) -> web.FileResponse:
    # a name that leaves the folder, or is not a file there, is a 404 with a JSON reason
    # (aiohttp's own static resource answers an empty body)
    name = request.match_info["name"]
    target = (STATIC / name).resolve()
    if not target.is_relative_to(STATIC) or not target.is_file():
        raise web.HTTPNotFound(reason=f"The console has no file {name!r}")
    return web.FileResponse(target, headers=_HEADERS)


async def _headers(request: web.Request, response: web.StreamResponse) -> None:
    if is_console_path(request.path):
        response.headers.update(_HEADERS)


def add_routes(app: web.Application) -> None:
    app.router.add_get("/", index)
    app.router.add_get(PREFIX + "/{name:.+}", static_file)
    app.on_response_prepare.append(_headers)
