"""The zero-copy framing of file data (boxd/_wire.py): no daemon needed."""

import unittest

import support  # noqa: F401  (puts the SDK on sys.path)
from boxd import _wire
from boxd.v1 import files_pb2


class WireTest(unittest.TestCase):
    def test_data_message_matches_protobuf(self) -> None:
        for data in (b"", b"x", bytes(range(256)) * 1000):
            want = files_pb2.WriteFileRequest(data=data).SerializeToString()
            got = _wire.data_message(9, memoryview(data))
            if data:
                self.assertEqual(got, want)
            self.assertEqual(files_pb2.WriteFileRequest.FromString(got).data, data)

    def test_split_read_response(self) -> None:
        split = _wire.splitter(files_pb2.ReadFileResponse, 2)
        m = files_pb2.ReadFileResponse(info=files_pb2.FileInfo(path="/a", size=3), data=b"abc")
        s = split(m.SerializeToString())
        self.assertEqual(bytes(s.data), b"abc")
        self.assertEqual(s.rest.info.path, "/a")
        s = split(files_pb2.ReadFileResponse(data=b"\xff" * 70000).SerializeToString())
        self.assertEqual(bytes(s.data), b"\xff" * 70000)
        self.assertIsNone(s.rest)
        s = split(b"")
        self.assertIsNone(s.data)

    def test_split_download_keeps_index(self) -> None:
        split = _wire.splitter(files_pb2.DownloadFilesResponse, 2)
        s = split(files_pb2.DownloadFilesResponse(data=b"zz", index=7).SerializeToString())
        self.assertEqual((bytes(s.data), s.rest.index), (b"zz", 7))
        done = files_pb2.DownloadFilesResponse(done=files_pb2.FileResult(index=7, path="p"), index=7)
        s = split(done.SerializeToString())
        self.assertIsNone(s.data)
        self.assertEqual(s.rest.WhichOneof("event"), "done")

    def test_bad_input(self) -> None:
        split = _wire.splitter(files_pb2.ReadFileResponse, 2)
        for bad in (b"\x12\x05ab", b"\x80", b"\x12", b"\x0f"):
            with self.assertRaises(ValueError, msg=bad):
                split(bad)


if __name__ == "__main__":
    unittest.main()
