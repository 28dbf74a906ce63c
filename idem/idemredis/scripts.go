package idemredis

import "github.com/redis/go-redis/v9"

// The protocol's steps on Redis, each one atomic on the server (a Lua script runs alone)
// and each touching the one key it is given (KEYS[1]), as Redis Cluster requires. The
// record's layout is in record.go: byte 2 is the state, bytes 3..34 (Lua counts from 1)
// the fencing token. Run with EVALSHA, falling back to EVAL when the server does not
// have the script cached (a restarted or failed-over server).

// claimScript claims KEYS[1] with the record ARGV[1] for ARGV[2] milliseconds (the
// lease) when no record exists: SET NX PX. It returns 1 when the claim was won, else the
// record that holds the key and its remaining time to live in milliseconds (PTTL: the
// server's clock), in the same atomic step.
var claimScript = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}
`)

// completeScript replaces the claim whose token is ARGV[1] with the completed record
// ARGV[2], kept ARGV[3] milliseconds (the retention), and returns 1. A key with no
// record (the lease ran out and no one claimed it since) is completed too, returning 2:
// the business ran, and no newer owner exists whose work the record would hide. A key
// held by another token (a newer owner, or its completed record) is left alone: 0, the
// fenced completion.
var completeScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 2
end
if string.sub(v, 2, 2) == 'p' and string.sub(v, 3, 34) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
`)

// releaseScript deletes the claim whose token is ARGV[1], so that a retry runs at once,
// and returns 1; it leaves any other record alone and returns 0.
var releaseScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 2, 2) == 'p' and string.sub(v, 3, 34) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`)

// Results of completeScript.
const (
	completeFenced  = 0
	completeOwned   = 1
	completeExpired = 2
)
