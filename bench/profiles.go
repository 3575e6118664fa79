package bench

// ProfileFits returns why backend b's servers cannot run under the
// durability profile, or "" when they can: a builder of cases leaves such
// a case out, as the runner skips it.
func ProfileFits(b Backend, durability string) string { return profileFits(b, durability) }
