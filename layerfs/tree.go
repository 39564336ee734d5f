//go:build linux

package layerfs

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"syscall"
)

// Entry is one name in a directory of a Layer, with everything stat(2) says
// about it that a Layer keeps.
type Entry struct {
	Name  string
	Mode  uint32 // st_mode: file type and permission bits
	UID   uint32
	GID   uint32
	Rdev  uint64
	Nlink uint32
	Size  int64
	Atime int64 // nanoseconds since the epoch
	Mtime int64
	Ctime int64
	// Content is the blob of a regular file or the tree of a directory.
	Content Digest
	// Target is the target of a symlink.
	Target string
	// LinkID is nonzero for an inode with more than one name; every name of
	// one inode in one Layer carries the same LinkID.
	LinkID uint64
	Xattrs []Xattr
}

// Xattr is one extended attribute.
type Xattr struct {
	Name  string
	Value []byte
}

// Type returns the file type bits of the entry's mode.
func (e *Entry) Type() uint32 { return e.Mode & syscall.S_IFMT }

// IsDir reports whether the entry is a directory.
func (e *Entry) IsDir() bool { return e.Type() == syscall.S_IFDIR }

// IsRegular reports whether the entry is a regular file.
func (e *Entry) IsRegular() bool { return e.Type() == syscall.S_IFREG }

const entryFormat = 1

// appendEntry appends the canonical encoding of e. The encoding is the
// identity of the entry: equal entries encode to equal bytes.
func appendEntry(b []byte, e *Entry) []byte {
	b = binary.AppendUvarint(b, entryFormat)
	b = binary.AppendUvarint(b, uint64(len(e.Name)))
	b = append(b, e.Name...)
	b = binary.AppendUvarint(b, uint64(e.Mode))
	b = binary.AppendUvarint(b, uint64(e.UID))
	b = binary.AppendUvarint(b, uint64(e.GID))
	b = binary.AppendUvarint(b, e.Rdev)
	b = binary.AppendUvarint(b, uint64(e.Nlink))
	b = binary.AppendVarint(b, e.Size)
	b = binary.AppendVarint(b, e.Atime)
	b = binary.AppendVarint(b, e.Mtime)
	b = binary.AppendVarint(b, e.Ctime)
	switch e.Type() {
	case syscall.S_IFREG, syscall.S_IFDIR:
		b = append(b, e.Content[:]...)
	case syscall.S_IFLNK:
		b = binary.AppendUvarint(b, uint64(len(e.Target)))
		b = append(b, e.Target...)
	}
	b = binary.AppendUvarint(b, e.LinkID)
	b = binary.AppendUvarint(b, uint64(len(e.Xattrs)))
	for _, x := range e.Xattrs {
		b = binary.AppendUvarint(b, uint64(len(x.Name)))
		b = append(b, x.Name...)
		b = binary.AppendUvarint(b, uint64(len(x.Value)))
		b = append(b, x.Value...)
	}
	return b
}

var errCorrupt = errors.New("corrupt encoding")

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errCorrupt
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errCorrupt
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if uint64(len(d.b)) < n {
		d.err = errCorrupt
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) entry(e *Entry) {
	if f := d.uvarint(); f != entryFormat && d.err == nil {
		d.err = fmt.Errorf("entry format %d: %w", f, errCorrupt)
		return
	}
	e.Name = string(d.bytes(d.uvarint()))
	e.Mode = uint32(d.uvarint())
	e.UID = uint32(d.uvarint())
	e.GID = uint32(d.uvarint())
	e.Rdev = d.uvarint()
	e.Nlink = uint32(d.uvarint())
	e.Size = d.varint()
	e.Atime = d.varint()
	e.Mtime = d.varint()
	e.Ctime = d.varint()
	switch e.Type() {
	case syscall.S_IFREG, syscall.S_IFDIR:
		copy(e.Content[:], d.bytes(uint64(len(e.Content))))
	case syscall.S_IFLNK:
		e.Target = string(d.bytes(d.uvarint()))
	}
	e.LinkID = d.uvarint()
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.err = errCorrupt
		return
	}
	e.Xattrs = nil
	for i := uint64(0); i < n && d.err == nil; i++ {
		name := string(d.bytes(d.uvarint()))
		val := append([]byte(nil), d.bytes(d.uvarint())...)
		e.Xattrs = append(e.Xattrs, Xattr{Name: name, Value: val})
	}
}

// encodeEntry returns the canonical encoding of one entry.
func encodeEntry(e *Entry) []byte { return appendEntry(nil, e) }

// decodeEntry decodes one entry encoded by encodeEntry.
func decodeEntry(b []byte) (Entry, error) {
	var e Entry
	d := decoder{b: b}
	d.entry(&e)
	if d.err == nil && len(d.b) != 0 {
		d.err = errCorrupt
	}
	return e, d.err
}

// encodeTree returns the canonical encoding of a directory's entries (sorted
// by name here) and its digest.
func encodeTree(entries []Entry) ([]byte, Digest) {
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	b := binary.AppendUvarint(nil, uint64(len(entries)))
	for i := range entries {
		b = appendEntry(b, &entries[i])
	}
	return b, sha256.Sum256(b)
}

// decodeTree decodes a tree object, checking it against its digest.
func decodeTree(b []byte, want Digest) ([]Entry, error) {
	if got := Digest(sha256.Sum256(b)); got != want {
		return nil, fmt.Errorf("tree object %s: content hashes to %s", want.Short(), got.Short())
	}
	d := decoder{b: b}
	n := d.uvarint()
	if n > uint64(len(b)) {
		return nil, fmt.Errorf("tree object %s: %w", want.Short(), errCorrupt)
	}
	entries := make([]Entry, n)
	for i := range entries {
		d.entry(&entries[i])
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = errCorrupt
	}
	if d.err != nil {
		return nil, fmt.Errorf("tree object %s: %w", want.Short(), d.err)
	}
	return entries, nil
}

// emptyTree is the tree of an empty directory.
var emptyTreeData, emptyTree = encodeTree(nil)
