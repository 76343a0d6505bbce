"""Turning downloaded bytes into what the model reads.

Plain functions and classes the gateway calls: ``sniff`` (what the bytes are),
``prepare_image`` + ``image_part`` (an image the model can see), ``read_document`` (a
file's text or a note on it), the ``Transcriber``s (speech to text), ``describe_image``
(an image put into words by an auxiliary vision model), ``synthesize`` (text to speech,
for voice replies) and the image markers that keep an image in a stored message's text.
``prepare_image`` and ``read_document`` are CPU work: call them with ``asyncio.to_thread``;
the network ones are async.
"""

from ._local_stt import LocalTranscriber
from .documents import DocumentText, display_name, human_size, read_document
from .errors import MediaProcessingError, SpeechError, TranscriptionError, UnreadableMediaError, VisionError
from .history import with_images
from .images import PreparedImage, image_part, prepare_image
from .markers import IMAGE_MARKER, find_image_markers, image_marker
from .sniff import SNIFF_BYTES, Kind, Sniffed, sniff
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
