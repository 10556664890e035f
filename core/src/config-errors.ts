// Where a broken carapace.json is wrong, in the words a person fixing it by hand needs:
// the file, the line and column, and what was expected there. jsonc-parser (strict JSON:
// no comments, no trailing commas) finds syntax errors and the place of a setting.
import { findNodeAtLocation, parse, parseTree, printParseErrorCode, type ParseError, type Node } from 'jsonc-parser';
import { StartupError } from './protocol/errors.js';

export interface ConfigProblem {
  file: string;
  line: number;
  column: number;
  /** The setting at fault (dotted), if the file parsed. */
  field: string | null;
  /** The same as a JSON pointer into the file (a plugin's section: /plugins/<name>/...), where one is known. */
  pointer?: string;
  /** What is wrong, and what was expected. */
  message: string;
}

/** CONFIG_INVALID with where: what the safe mode shows and the one start-up line says. */
export class ConfigError extends StartupError {
  constructor(readonly problem: ConfigProblem) {
    super('CONFIG_INVALID', `${problem.file} line ${problem.line}, column ${problem.column}: ${problem.message}`);
  }
}

const EXPECTED: Record<string, string> = {
  InvalidSymbol: 'a character that does not belong here',
  InvalidNumberFormat: 'a number written wrongly',
  PropertyNameExpected: 'expected a name in double quotes (or a comma too many before this)',
  ValueExpected: 'expected a value (or a comma too many before this)',
  ColonExpected: 'expected a colon after the name',
  CommaExpected: 'expected a comma (between two entries)',
  CloseBraceExpected: 'expected a closing brace }',
  CloseBracketExpected: 'expected a closing bracket ]',
  EndOfFileExpected: 'expected the end of the file (something after the last })',
  InvalidCommentToken: 'comments are not allowed in JSON',
  UnexpectedEndOfComment: 'comments are not allowed in JSON',
  UnexpectedEndOfString: 'a string that is not closed (a missing ")',
  UnexpectedEndOfNumber: 'a number that ends too early',
  InvalidUnicode: 'a wrong \\u escape',
  InvalidEscapeCharacter: 'a wrong escape after \\ in a string',
  InvalidCharacter: 'a character not allowed in a string (a line break or a tab?)',
};

function lineAndColumn(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, Math.max(0, Math.min(offset, text.length)));
  const line = before.split('\n').length;
  return { line, column: offset - (before.lastIndexOf('\n') + 1) + 1 };
}

/** A syntax error in `text`, located; null when it is valid JSON to jsonc-parser too. */
export function syntaxProblem(file: string, text: string): ConfigProblem | null {
  const errors: ParseError[] = [];
  parse(text, errors, { disallowComments: true, allowTrailingComma: false, allowEmptyContent: false });
  const first = errors[0];
  if (!first) return null;
  const code = printParseErrorCode(first.error);
  return { file, ...lineAndColumn(text, first.offset), field: null, message: `not valid JSON: ${EXPECTED[code] ?? code}` };
}

/** A setting that breaks the schema, located at its name (or its object's, if it is missing). */
export function settingProblem(file: string, text: string, field: string, message: string): ConfigProblem {
  return settingProblemAt(file, text, field ? field.split('.').map((p) => (/^\d+$/.test(p) ? Number(p) : p)) : [], message);
}

/** The same, for a path given key by key (keys may hold dots: a mail address). */
export function settingProblemAt(file: string, text: string, at: (string | number)[], message: string, pointer?: string): ConfigProblem {
  const field = at.join('.');
  const root = parseTree(text);
  let path = at;
  let node: Node | undefined;
  while (root && !(node = findNodeAtLocation(root, path)) && path.length > 0) path = path.slice(0, -1);
  const offset = node?.parent?.type === 'property' ? node.parent.offset : node?.offset ?? 0;
  return { file, ...lineAndColumn(text, offset), field: field || null, ...(pointer ? { pointer } : {}), message };
}
