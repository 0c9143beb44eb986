// Package sipcall holds the test where a browser listens to a live phone call placed over SIP
// by the SIP test phone (sip/siptest) into Parley's SIP server. It lives apart from package
// webrtc so that webrtc's own tests do not depend on the sip package. It has no code.
package sipcall
