"""Models used in the book. Each exposes ``loss(batch) -> (loss, logs)`` for
:func:`nearid.train.fit`, and autoencoders expose ``encode`` / ``decode``."""

from nearid.models.autoencoder import MLPAutoencoder, mlp

__all__ = ["MLPAutoencoder", "mlp"]
