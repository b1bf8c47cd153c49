package wire

import (
	"io/fs"
	"testing"
)

func TestFileStatFileMode(t *testing.T) {
	for _, c := range []struct {
		st   FileStat
		want fs.FileMode
	}{
		{FileStat{Type: FileTypeRegular, Mode: 0o4755}, fs.ModeSetuid | 0o755},
		{FileStat{Type: FileTypeDir, Mode: 0o3775}, fs.ModeDir | fs.ModeSetgid | fs.ModeSticky | 0o775},
		{FileStat{Type: FileTypeSymlink, Mode: 0o777}, fs.ModeSymlink | 0o777},
		{FileStat{Type: FileTypeChar, Mode: 0o620}, fs.ModeDevice | fs.ModeCharDevice | 0o620},
		{FileStat{Type: FileTypeBlock, Mode: 0o660}, fs.ModeDevice | 0o660},
		{FileStat{Type: FileTypeFIFO, Mode: 0o644}, fs.ModeNamedPipe | 0o644},
		{FileStat{Type: FileTypeSocket, Mode: 0o755}, fs.ModeSocket | 0o755},
	} {
		if got := c.st.FileMode(); got != c.want {
			t.Errorf("%+v: %v, want %v", c.st, got, c.want)
		}
	}
}
