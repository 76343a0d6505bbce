"""Turning downloaded bytes into what the model reads.

Plain functions and classes the gateway calls: ``sniff`` (what the bytes are),
``prepare_image`` + ``image_part`` (an image the model can see), ``read_document`` (a
file's text or a note on it), the ``Transcriber``s (speech to text), ``describe_image``
(an image put into words by an auxiliary vision model), ``synthesize`` (text to speech,
for voice replies) and the image markers that keep an image in a stored message's text.
``prepare_image`` and ``read_document`` are CPU work: call them with ``asyncio.to_thread``;
the network ones are async.

Its names load on first use (PEP 562, ``storage.lazy``): the error tree needs ``errors`` only, not
Pillow, pypdf and the HTTP client.
"""

from typing import TYPE_CHECKING

from storage.lazy import lazy_names

# Loaded now, not on first use: ``sniff`` is this package's function and also the name of its module,
# and importing the module (which the other modules do) would leave the module under that name.
from .sniff import SNIFF_BYTES, Kind, Sniffed, sniff

if TYPE_CHECKING:
    from ._local_stt import LocalTranscriber
    from .documents import DocumentText, display_name, human_size, read_document
    from .errors import (
        MediaProcessingError,
        SpeechError,
        TranscriptionError,
        UnreadableMediaError,
        VisionError,
    )
    from .history import with_images
    from .images import PreparedImage, image_part, prepare_image
    from .markers import IMAGE_MARKER, find_image_markers, image_marker
    from .speech import MAX_SPEECH_INPUT, speech_input, synthesize
    from .transcribe import HttpTranscriber, Transcriber, Transcript
    from .vision import DESCRIBE_PROMPT, describe_image

__all__ = [
    "DESCRIBE_PROMPT",
    "IMAGE_MARKER",
    "MAX_SPEECH_INPUT",
    "SNIFF_BYTES",
    "DocumentText",
    "HttpTranscriber",
    "Kind",
    "LocalTranscriber",
    "MediaProcessingError",
    "PreparedImage",
    "Sniffed",
    "SpeechError",
    "Transcriber",
    "Transcript",
    "TranscriptionError",
    "UnreadableMediaError",
    "VisionError",
    "describe_image",
    "display_name",
    "find_image_markers",
    "human_size",
    "image_marker",
    "image_part",
    "prepare_image",
    "read_document",
    "sniff",
    "speech_input",
    "synthesize",
    "with_images",
]

_WHERE = {
    "DESCRIBE_PROMPT": "core.media.vision",
    "DocumentText": "core.media.documents",
    "HttpTranscriber": "core.media.transcribe",
    "IMAGE_MARKER": "core.media.markers",
    "LocalTranscriber": "core.media._local_stt",
    "MAX_SPEECH_INPUT": "core.media.speech",
    "MediaProcessingError": "core.media.errors",
    "PreparedImage": "core.media.images",
    "SpeechError": "core.media.errors",
    "Transcriber": "core.media.transcribe",
    "Transcript": "core.media.transcribe",
    "TranscriptionError": "core.media.errors",
    "UnreadableMediaError": "core.media.errors",
    "VisionError": "core.media.errors",
    "describe_image": "core.media.vision",
    "display_name": "core.media.documents",
    "find_image_markers": "core.media.markers",
    "human_size": "core.media.documents",
    "image_marker": "core.media.markers",
    "image_part": "core.media.images",
    "prepare_image": "core.media.images",
    "read_document": "core.media.documents",
    "speech_input": "core.media.speech",
    "synthesize": "core.media.speech",
    "with_images": "core.media.history",
}

__getattr__ = lazy_names(__name__, _WHERE)
