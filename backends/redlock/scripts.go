package redlock

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
)

// script is a Lua script run with EVALSHA, loaded on every connection when
// it is dialled, and re-loaded if a node answers NOSCRIPT. Redis runs a
// script alone, so scripts share code by concatenation: the acquire
// script and the lean path's fencing script both begin with fence.lua.
type script struct {
	src string
	sha string
}

func newScript(src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{src: src, sha: hex.EncodeToString(sum[:])}
}

var (
	//go:embed scripts/fence.lua
	fenceLua string
	//go:embed scripts/acquire.lua
	acquireLua string
	//go:embed scripts/advance.lua
	advanceLua string
	//go:embed scripts/extend.lua
	extendLua string
	//go:embed scripts/release.lua
	releaseLua string
	//go:embed scripts/release_lean.lua
	releaseLeanLua string
	//go:embed scripts/raise.lua
	raiseLua string
	//go:embed scripts/probe.lua
	probeLua string
	//go:embed scripts/bootstrap.lua
	bootstrapLua string

	acquireScript   = newScript(fenceLua + acquireLua)
	advanceScript   = newScript(fenceLua + advanceLua)
	extendScript    = newScript(extendLua)
	releaseScript   = newScript(releaseLua)
	leanScript      = newScript(releaseLeanLua)
	raiseScript     = newScript(raiseLua)
	probeScript     = newScript(probeLua)
	bootstrapScript = newScript(bootstrapLua)

	allScripts = []*script{acquireScript, advanceScript, extendScript, releaseScript, leanScript, raiseScript, probeScript, bootstrapScript}
)
