package llamacpp

import (
	"errors"
	"runtime"
	"unsafe"
)

// cChatMessage mirrors struct llama_chat_message { const char * role; const char * content; }.
type cChatMessage struct {
	role    *byte
	content *byte
}

var (
	// int32_t llama_chat_apply_template(const char * tmpl, const struct llama_chat_message * chat,
	//                                   size_t n_msg, bool add_ass, char * buf, int32_t length);
	llamaChatApplyTemplate func(tmpl *byte, chat unsafe.Pointer, n uintptr, addAss bool, buf *byte, length int32) int32
)

func init() {
	register(func(libs libraries) error {
		return bindAll(libs.llama, []binding{{&llamaChatApplyTemplate, "llama_chat_apply_template"}})
	})
}

// ChatMessage is one message for ApplyChatTemplate.
type ChatMessage struct {
	Role    string
	Content string
}

// ErrUnknownTemplate is returned when llama.cpp does not recognise a chat
// template (it matches a list of known templates, it has no Jinja engine).
var ErrUnknownTemplate = errors.New("llamacpp: chat template not supported by llama.cpp")

// ApplyChatTemplate renders msgs with tmpl (usually Model.ChatTemplate).
// addAssistant appends the opening of an assistant turn. It is the
// fallback of the llama backend, for templates the Jinja engine (package
// chattemplate) refuses: it has no enable_thinking, and it renders
// Qwen3's template as ChatML, keeping earlier replies' reasoning.
func ApplyChatTemplate(tmpl string, msgs []ChatMessage, addAssistant bool) (string, error) {
	ctmpl := cString(tmpl)
	// Keep every C string reachable from Go until the call returns.
	strs := make([][]byte, 0, 2*len(msgs))
	cmsgs := make([]cChatMessage, len(msgs)+1) // +1: never index an empty slice
	total := 0
	for i, m := range msgs {
		r, c := cString(m.Role), cString(m.Content)
		strs = append(strs, r, c)
		cmsgs[i] = cChatMessage{role: &r[0], content: &c[0]}
		total += len(m.Role) + len(m.Content)
	}
	buf := make([]byte, 2*total+256)
	n := llamaChatApplyTemplate(&ctmpl[0], unsafe.Pointer(&cmsgs[0]), uintptr(len(msgs)), addAssistant, &buf[0], int32(len(buf)))
	if n > int32(len(buf)) {
		buf = make([]byte, n)
		n = llamaChatApplyTemplate(&ctmpl[0], unsafe.Pointer(&cmsgs[0]), uintptr(len(msgs)), addAssistant, &buf[0], int32(len(buf)))
	}
	runtime.KeepAlive(ctmpl)
	runtime.KeepAlive(strs)
	runtime.KeepAlive(cmsgs)
	if n < 0 {
		return "", ErrUnknownTemplate
	}
	return string(buf[:n]), nil
}
