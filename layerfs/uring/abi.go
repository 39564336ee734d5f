//go:build linux

package uring

import "github.com/hanwen/go-fuse/v2/fuse"

// The FUSE-over-io_uring ABI (include/uapi/linux/fuse.h, 7.42+, Linux 6.14+;
// Documentation/filesystems/fuse/fuse-io-uring.rst).
const (
	// capOverIOURing is FUSE_OVER_IO_URING, bit 41 of the INIT flags
	// (bit 9 of flags2).
	capOverIOURing = fuse.CAP_OVER_IO_URING

	cmdRegister       = 1 // FUSE_IO_URING_CMD_REGISTER
	cmdCommitAndFetch = 2 // FUSE_IO_URING_CMD_COMMIT_AND_FETCH

	// struct fuse_uring_req_header: in_out[128], op_in[128], then
	// struct fuse_uring_ent_in_out {flags, commit_id u64; payload_sz,
	// padding u32; reserved u64}.
	hdrInOut       = 0
	hdrOpIn        = 128
	hdrOpInSize    = 128
	hdrEntInOut    = 256
	hdrCommitID    = hdrEntInOut + 8
	hdrPayloadSize = hdrEntInOut + 16
	reqHeaderSize  = 256 + 32

	// struct fuse_uring_cmd_req in the SQE's command area: flags u64,
	// commit_id u64, qid u16, padding[6].
	cmdReqCommitID = 8
	cmdReqQid      = 16

	inHeaderSize  = 40 // struct fuse_in_header
	outHeaderSize = 16 // struct fuse_out_header

	// The kernel's smallest payload buffer (FUSE_MIN_READ_BUFFER) and its
	// request size without FUSE_MAX_PAGES (FUSE_DEFAULT_MAX_PAGES_PER_REQ).
	minReadBuffer        = 8192
	defaultMaxPagesPerRq = 32

	opInit   = 26 // FUSE_INIT
	opSetlkw = 33
	opIoctl  = 39
	opPoll   = 40
)
