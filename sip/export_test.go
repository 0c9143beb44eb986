package sip

// SetRaceHooks makes s run starting before a call's conversation starts and legEnded once a
// leg's end has read the call's state: tests sleep in them to walk the orders of a BYE and a
// starting conversation. Set it before Run.
func SetRaceHooks(s *Server, starting, legEnded func()) {
	s.hooks = &raceHooks{starting: starting, legEnded: legEnded}
}
