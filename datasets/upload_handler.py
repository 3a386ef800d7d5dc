"""Refuse an upload over TRAINBOARD_UPLOAD_MAX_BYTES before the whole body is read.

Installed first in ``request.upload_handlers`` by the upload view. It looks at
Content-Length before parsing starts, and counts file bytes as they stream in, so a
too-large body is abandoned at the first chunk past the limit (StopUpload with
connection_reset, so Django does not drain the rest). The view then answers 413.
"""

from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import QueryDict
from django.utils.datastructures import MultiValueDict

# Room for the multipart boundaries and the small form fields around the file.
MULTIPART_SLACK = 64 * 1024


class SizeLimitUploadHandler(FileUploadHandler):
    def __init__(self, request=None, max_bytes: int = 0):
        super().__init__(request)
        self.max_bytes = max_bytes
        self.received = 0
        self.refused = False

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        if content_length and content_length > self.max_bytes + MULTIPART_SLACK:
            self.refused = True
            return QueryDict(), MultiValueDict()  # parsed as empty: the body is never read
        return None

    def receive_data_chunk(self, raw_data, start):
        self.received += len(raw_data)
        if self.received > self.max_bytes:
            self.refused = True
            raise StopUpload(connection_reset=True)
        return raw_data  # pass on to the next handler, which stores it

    def file_complete(self, file_size):
        return None
