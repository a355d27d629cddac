// The pi the tests run in: PI_SCOPE names its npm scope, @earendil-works
// (pi 1.x, Node >= 22.19; the default) or @mariozechner (pi 0.73.1, Node >=
// 20.6). What differs between the two is smoothed over here, once.

export const scope = process.env.PI_SCOPE || "@earendil-works";
if (scope !== "@earendil-works" && scope !== "@mariozechner") {
  throw new Error(`PI_SCOPE is ${scope}: want @earendil-works or @mariozechner`);
}
/** Whether this pi keeps its prompt and tools as system messages (pi 1.x). */
export const modern = scope === "@earendil-works";

const ai = await import(`${scope}/pi-ai`);
export const piAgent = await import(`${scope}/pi-coding-agent`);
export const { fauxAssistantMessage, fauxText, fauxToolCall } = ai;

/**
 * pi-ai's faux provider with these models: pi 1.x has a provider each
 * session's ModelRuntime takes (modelAccess), 0.73.1 a global registration.
 */
export function fauxModels(models) {
  return modern ? ai.fauxProvider({ models }) : ai.registerFauxProvider({ models });
}

/**
 * What the model got in a faux provider's context: the system prompt, the
 * messages but system ones, and the tool names. pi 1.x sends the prompt and
 * tools as system messages; 0.73.1 as fields of the context.
 */
export function modelRequest(context) {
  const messages = structuredClone(context.messages);
  if (!modern) {
    return { systemPrompt: context.systemPrompt, messages, tools: (context.tools ?? []).map((t) => ({ name: t.name })) };
  }
  return {
    systemPrompt: ai.getCurrentSystemPrompt(context.messages),
    messages: messages.filter((m) => m.role !== "system"),
    tools: ai.getCurrentTools(context.messages).map((t) => ({ name: t.name })),
  };
}

/**
 * The createAgentSession options that give a session the model with a
 * key: pi 1.x has a ModelRuntime, 0.73.1 an AuthStorage and a ModelRegistry.
 */
export async function modelAccess(faux, model, agentDir) {
  if (modern) {
    const modelRuntime = await piAgent.ModelRuntime.create({ authPath: `${agentDir}/auth.json`, modelsPath: `${agentDir}/models.json` });
    modelRuntime.registerNativeProvider(faux.provider);
    await modelRuntime.setRuntimeApiKey(model.provider, "faux-key");
    return { modelRuntime };
  }
  const authStorage = piAgent.AuthStorage.inMemory();
  authStorage.setRuntimeApiKey(model.provider, "faux-key");
  return { authStorage, modelRegistry: piAgent.ModelRegistry.inMemory(authStorage) };
}
