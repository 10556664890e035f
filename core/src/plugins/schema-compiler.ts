// One ajv configuration for every schema the core compiles: tool arguments, manifests,
// plugin config. Defaults are applied in place; unknown keywords are an error.
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';

// ajv-formats is CommonJS; under NodeNext its default export arrives wrapped.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

/** `allErrors`: every failure, not only the first (the core's check of plugin sections sets some aside). */
export function createAjv(options: { allErrors?: boolean } = {}): Ajv {
  const ajv = new Ajv({ useDefaults: true, allErrors: options.allErrors ?? false, strict: true, strictTypes: false, strictTuples: false, strictRequired: false });
  addFormats(ajv);
  return ajv;
}

export interface SchemaFailure {
  field: string;
  message: string;
}

/** Turns ajv's first error into the field it concerns and a message for the agent. */
export function describeFailure(errors: ErrorObject[] | null | undefined): SchemaFailure {
  const error = errors?.[0];
  if (!error) return { field: '', message: 'Invalid value' };
  const path = error.instancePath.split('/').slice(1).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  const params = error.params as Record<string, unknown>;
  if (error.keyword === 'additionalProperties') {
    const name = String(params.additionalProperty);
    return { field: [...path, name].join('.'), message: `additionalProperties "${name}" not allowed` };
  }
  if (error.keyword === 'required') {
    const name = String(params.missingProperty);
    return { field: [...path, name].join('.'), message: `missing required property "${name}"` };
  }
  const field = path.join('.');
  if (error.keyword === 'enum' && Array.isArray(params.allowedValues)) {
    return { field, message: `${field || 'value'} must be one of ${params.allowedValues.map((v) => JSON.stringify(v)).join(', ')}` };
  }
  return { field, message: `${field || 'value'} ${error.message ?? 'is invalid'}` };
}

export type { Ajv, ValidateFunction };
