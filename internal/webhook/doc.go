// Package webhook holds the mutating and validating admission webhooks for
// Backend and Frontend. The handlers are thin: the mutating one calls
// defaults.Orders.Apply and the sequencer's gate rules, the validating one
// checks each prerequisite and calls the sequencer's cycle check. Neither
// writes anything, so both are side-effect free and dry-run safe.
package webhook
