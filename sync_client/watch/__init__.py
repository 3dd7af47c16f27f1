"""The watcher, `memsync watch`, in parts: `watcher` composes them (see docs/architecture.md).

Kept empty: importing one part must not load the others.
"""
