#!/usr/bin/env python3
"""create-cache: create the cache resource requested in a cache-resource-change process.

Used by the cache-resource-change template as the after-plugin of its automatic "create" node. It reads from the
instance context:

    size_gb  -- the memory size asked for, a positive number (at most 1024); the cache-resource-change template
                calls it memory_gb, which is read when size_gb is absent
    cluster  -- the cluster the cache belongs to, e.g. "sh-redis-01"
    app      -- optional: the application asking for it

and writes the created resource back into the context:

    {"context": {"cache": {"id": "cache-sh-redis-01-1a2b3c4d", "cluster": ..., "size_gb": ..., "status": "created"}}}

This example only simulates the cache control platform: where the comment says so, a real plugin calls its API
(the URL and credentials go into the node definition or a file, never the environment: Halley scrubs it). For a
platform that creates the cache in the background, answer write_output(async_=True) and let the platform call
POST /api/v1/plugin-runs/{run_id}/result when it is done (see docs/plugins.md).

Upload it alone: Halley puts halley_plugin.py next to every Python run. To try it locally:

    echo '{"run_id":"r1","context":{"size_gb":8,"cluster":"sh-redis-01"}}' | PYTHONPATH=plugin/sdk python3 create-cache.py
"""

import hashlib
import numbers

import halley_plugin as hp

MAX_SIZE_GB = 1024


def main():
    inp = hp.read_input()
    ctx = inp["context"]

    key = "size_gb" if ctx.get("size_gb") is not None else "memory_gb"
    size = ctx.get(key)
    if isinstance(size, str):
        try:
            size = float(size)
        except ValueError:
            hp.fail("%s must be a number, got %r" % (key, ctx.get(key)))
    if isinstance(size, bool) or not isinstance(size, numbers.Real) or size <= 0:
        hp.fail("size_gb (or memory_gb) must be a positive number, got %r" % (ctx.get(key),))
    if size > MAX_SIZE_GB:
        hp.fail("size_gb %s is above the limit of %d" % (size, MAX_SIZE_GB))
    cluster = ctx.get("cluster")
    if not isinstance(cluster, str) or not cluster.strip():
        hp.fail("cluster is required")
    cluster = cluster.strip()

    # A real plugin calls the cache control platform here, e.g.
    #   resp = urllib.request.urlopen(Request(platform + "/caches", data=..., method="POST"))
    # The id is derived from the run id so a retried run asks for the same cache (the platform can de-duplicate).
    digest = hashlib.sha256(("%s/%s" % (inp.get("run_id", ""), cluster)).encode()).hexdigest()[:8]
    cache = {
        "id": "cache-%s-%s" % (cluster, digest),
        "cluster": cluster,
        "size_gb": int(size) if float(size).is_integer() else size,
        "status": "created",
    }
    if ctx.get("app"):
        cache["app"] = ctx["app"]
    hp.log("created cache %s (%s GB) in %s" % (cache["id"], cache["size_gb"], cluster))
    hp.write_output(context={"cache": cache})


if __name__ == "__main__":
    main()
