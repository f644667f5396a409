"""`streams_registry`: the reference's registry object for Stream subclasses (`register`, `get`),
over the same table as `register_stream` / `StreamingDataset(stream_name=...)`."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from streaming.stream import Stream, register_stream, registered_streams, stream_class


class StreamRegistry:
    """Register Stream subclasses by name, as `streams_registry.register("mine", func=MyStream)`
    or as a class decorator `@streams_registry.register("mine")`."""

    def register(self, name: str, func: type[Stream] | None = None
                 ) -> type[Stream] | Callable[[type[Stream]], type[Stream]]:
        """Register `func` under `name` (returned unchanged); without `func`, a decorator."""
        if func is None:
            def decorate(cls: type[Stream]) -> type[Stream]:
                register_stream(name, cls)
                return cls

            return decorate
        register_stream(name, func)
        return func

    def get(self, name: str) -> type[Stream]:
        """The class registered under `name` (PlanError, a ValueError, listing known names)."""
        return stream_class(name)

    def get_all(self) -> dict[str, type[Stream]]:
        """Every registered class by name."""
        return registered_streams()

    def __contains__(self, name: object) -> bool:
        return name in registered_streams()

    def __iter__(self) -> Iterator[str]:
        return iter(registered_streams())


streams_registry = StreamRegistry()

__all__ = ["StreamRegistry", "streams_registry"]
