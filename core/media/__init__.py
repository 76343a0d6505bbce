"""Turning downloaded bytes into what the model reads.

Plain functions and classes the gateway calls: ``sniff`` (what the bytes are),
``prepare_image`` + ``image_part`` (an image the model can see), ``read_document`` (a
file's text or a note on it), the ``Transcriber``s (speech to text) and the image markers that keep
an image in a stored message's text. ``prepare_image`` and ``read_document`` are CPU
work: call them with ``asyncio.to_thread``.
"""

from ._local_stt import LocalTranscriber
from .documents import DocumentText, display_name, human_size, read_document
from .errors import MediaProcessingError, TranscriptionError, UnreadableMediaError, VisionError
from .images import PreparedImage, image_part, prepare_image
from .markers import IMAGE_MARKER, find_image_markers, image_marker
from .sniff import SNIFF_BYTES, Kind, Sniffed, sniff
from .transcribe import HttpTranscriber, Transcriber, Transcript

__all__ = [
    "IMAGE_MARKER",
    "SNIFF_BYTES",
    "DocumentText",
    "HttpTranscriber",
    "Kind",
    "LocalTranscriber",
    "MediaProcessingError",
    "PreparedImage",
    "Sniffed",
    "Transcriber",
    "Transcript",
    "TranscriptionError",
    "UnreadableMediaError",
    "VisionError",
    "display_name",
    "find_image_markers",
    "human_size",
    "image_marker",
    "image_part",
    "prepare_image",
    "read_document",
    "sniff",
]
