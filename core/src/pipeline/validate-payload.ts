// Stage 3: arguments against the tool's JSON Schema. Defaults are filled in; undeclared
// fields (including "__proto__" and forged envelope fields) are rejected. A core tool may
// say more (propose_write's paths): refused here, before any person is asked.
import { checkIntrinsic } from '../intrinsics/intrinsics.js';
import type { ToolEntry } from '../plugins/discovery.js';
import { describeFailure } from '../plugins/schema-compiler.js';
import { pipelineError, type ErrorPayload } from '../protocol/errors.js';
import type { JsonObject } from '../protocol/envelope.js';

export function validatePayload(tool: ToolEntry, args: JsonObject): ErrorPayload | null {
  if (tool.validate(args)) return tool.owner === 'core' ? checkIntrinsic(tool.name, args) : null;
  const { field, message } = describeFailure(tool.validate.errors);
  return pipelineError('VALIDATION_FAILED', message, false, { stage: 3, field });
}
