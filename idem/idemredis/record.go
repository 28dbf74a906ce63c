package idemredis

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/idemgen/idemgen/idem"
)

// A key's record is one Redis string, written whole by the claim (SET NX PX) and the
// completion (a Lua script), so that the scripts read the fencing token at a fixed offset:
//
//	offset  size  field
//	0       1     version '1'
//	1       1     state: 'p' processing (a claim), 'c' completed
//	2       32    the claim's fencing token, hex
//	34      32    the request fingerprint (idem.Fingerprint, SHA-256)
//	66      2     n, the operation's length (big-endian)
//	68      n     the operation id
//	completed records go on:
//	68+n    2     the response status
//	70+n    4     m, the length of the header lines (big-endian)
//	74+n    m     the stored header lines as JSON ([["Name","value"], ...])
//	74+n+m  rest  the response body, byte for byte
const (
	recordVersion   = '1'
	stateProcessing = 'p'
	stateCompleted  = 'c'
	tokenLen        = 32
	fingerprintLen  = sha256.Size
	headLen         = 2 + tokenLen + fingerprintLen + 2
)

// record is a decoded key record.
type record struct {
	state       byte
	token       string
	fingerprint []byte
	operation   string
	// The response of a completed record.
	status int
	header []idem.HeaderLine
	body   []byte
}

var errBadRecord = errors.New("idemredis: the key's record is not one this package wrote")

func encodeHead(buf []byte, state byte, token string, fp []byte, op string) []byte {
	buf = append(buf, recordVersion, state)
	buf = append(buf, token...)
	buf = append(buf, fp...)
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(op)))
	return append(buf, op...)
}

// encodeClaim is the record of a claim.
func encodeClaim(token string, fp []byte, op string) string {
	return string(encodeHead(make([]byte, 0, headLen+len(op)), stateProcessing, token, fp, op))
}

// encodeCompleted is the record of a completed key holding resp's stored part (its
// header lines without Set-Cookie, see idem.Response.StoredHeader).
func encodeCompleted(token string, fp []byte, op string, resp *idem.Response) (string, error) {
	header, err := json.Marshal(resp.StoredHeader())
	if err != nil {
		return "", err
	}
	buf := make([]byte, 0, headLen+len(op)+6+len(header)+len(resp.Body))
	buf = encodeHead(buf, stateCompleted, token, fp, op)
	buf = binary.BigEndian.AppendUint16(buf, uint16(resp.Status))
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(header)))
	buf = append(buf, header...)
	buf = append(buf, resp.Body...)
	return string(buf), nil
}

// decode parses a record written by encodeClaim or encodeCompleted.
func decode(v string) (record, error) {
	b := []byte(v)
	if len(b) < headLen || b[0] != recordVersion || (b[1] != stateProcessing && b[1] != stateCompleted) {
		return record{}, errBadRecord
	}
	r := record{state: b[1], token: string(b[2 : 2+tokenLen]), fingerprint: b[2+tokenLen : 2+tokenLen+fingerprintLen]}
	n := int(binary.BigEndian.Uint16(b[headLen-2:]))
	rest := b[headLen:]
	if len(rest) < n {
		return record{}, errBadRecord
	}
	r.operation, rest = string(rest[:n]), rest[n:]
	if r.state == stateProcessing {
		return r, nil
	}
	if len(rest) < 6 {
		return record{}, errBadRecord
	}
	r.status = int(binary.BigEndian.Uint16(rest))
	m := int(binary.BigEndian.Uint32(rest[2:]))
	rest = rest[6:]
	if len(rest) < m {
		return record{}, errBadRecord
	}
	if err := json.Unmarshal(rest[:m], &r.header); err != nil {
		return record{}, fmt.Errorf("%w: header lines: %v", errBadRecord, err)
	}
	r.body = append([]byte{}, rest[m:]...)
	return r, nil
}

// redisKey is the Redis key of (scope, key): prefix + "{" + hex SHA-256 of the pair's
// length-prefixed encoding + "}". The braces make the digest the key's Redis Cluster hash
// tag, so every record of one idempotency key lands in one hash slot whatever the bytes
// of the scope and key (which may hold braces themselves); the digest bounds the Redis
// key's length (an idempotency key may be 255 bytes, a scope longer).
func redisKey(prefix, scope, key string) string {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(scope)))
	h.Write(n[:])
	h.Write([]byte(scope))
	h.Write([]byte(key))
	var sum [sha256.Size]byte
	return prefix + "{" + hex.EncodeToString(h.Sum(sum[:0])) + "}"
}
