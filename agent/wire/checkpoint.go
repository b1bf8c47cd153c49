package wire

import (
	"crypto/hmac"
	"crypto/sha256"
)

// A gVisor sandbox's checkpoint (runsc checkpoint) cannot save a socket
// bound to a host file, and the init's agent socket is one (runsc's gofer
// made it). So before boxd checkpoints a sandbox, the init lets go of
// every host socket it holds, and after the checkpoint (with
// --leave-running) or the restore it binds a new one; boxd then makes sure
// the new socket is the init's before it pins it:
//
//	checkpoint-prepare: -> request{args: CheckpointPrepare}   <- ok, then EOF
//
// The init keeps the secret (in its own memory: the init is not dumpable,
// so no process of the sandbox can read it), closes its agent listener and
// every agent connection but this one, replies ok and closes this one too:
// the EOF after the ok tells boxd the init holds no host socket any more.
// On SIGUSR2 (boxd sends it through the runtime once the checkpoint or the
// restore is done) the init binds a new agent socket.
//
//	checkpoint-resume: -> request{args: CheckpointResume}   <- ok{CheckpointProof}
//
// Code in the sandbox could have bound a socket of its own in the agent
// directory meanwhile; only the init knows the secret, so only its answer
// to boxd's fresh nonce carries the right MAC.
const (
	OpCheckpointPrepare = "checkpoint-prepare"
	OpCheckpointResume  = "checkpoint-resume"
)

// CheckpointSecretSize is the size of the secret of checkpoint-prepare
// and of the nonce of checkpoint-resume.
const CheckpointSecretSize = 32

// CheckpointPrepare is checkpoint-prepare's argument.
type CheckpointPrepare struct {
	Secret []byte `json:"secret"`
}

// CheckpointResume is checkpoint-resume's argument.
type CheckpointResume struct {
	Nonce []byte `json:"nonce"`
}

// CheckpointProof is checkpoint-resume's answer: CheckpointMAC(secret, nonce).
type CheckpointProof struct {
	MAC []byte `json:"mac"`
}

// CheckpointMAC is the proof an init that holds secret gives for nonce.
func CheckpointMAC(secret, nonce []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("boxd checkpoint resume\x00"))
	h.Write(nonce)
	return h.Sum(nil)
}
