"""Acceptance source for URL targets: vLLM's Prometheus `/metrics` page, scraped at the edges of a window."""

from __future__ import annotations

from ..errors import EndpointFailed
from .acceptance import SpecCounters, parse_prometheus


async def scrape_async(url: str, timeout: float = 10.0, headers: dict[str, str] | None = None) -> SpecCounters:
    """GET a Prometheus exposition and parse vLLM's spec-decode counters."""
    import aiohttp

    from ..runtime.failures import error_text

    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session:
            async with session.get(url, headers=headers) as resp:
                body = await resp.read()
                if resp.status != 200:
                    raise EndpointFailed(f"GET {url} answered HTTP {resp.status}: {error_text(body)}",
                                         "start vLLM with its metrics enabled, or check the URL")
    except (aiohttp.ClientError, TimeoutError) as exc:
        from ..runtime.failures import connect_error_text

        raise EndpointFailed(f"cannot reach {url} ({connect_error_text(exc)})",
                             "check the URL and that the server is up") from None
    return parse_prometheus(body.decode("utf-8", "replace"))


def scrape(url: str, timeout: float = 10.0, headers: dict[str, str] | None = None) -> SpecCounters:
    import asyncio

    return asyncio.run(scrape_async(url, timeout, headers))
