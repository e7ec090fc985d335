#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Patches of the series that change files of the overlay.

A new file of ours belongs to the patch that patches/series lists it with,
and the overlay holds its final version.  A later patch (a feature added
on top) may change it: its diff then has a section for that file.  This
script keeps the two consistent:

  upstream PATCH            print PATCH without its sections of overlay
                            files (prepare-tree applies the rest to upstream)
  versions OUTDIR           write every overlay file as its own patch adds it:
                            the final file with the later patches' sections
                            reverse-applied (make-series)
  refresh PATCH [--base REV] FILE...
                            rewrite PATCH's sections of FILEs from the files
                            in the work tree; the file before PATCH is REV's
                            (default HEAD) with the sections of PATCH and the
                            later patches, as of REV, reverse-applied
  carve PATCH DIR FILE...   move a feature into PATCH, the last patch: DIR
                            holds FILEs without it, the work tree with it;
                            what the two differ by is taken out of every
                            version of FILEs, and PATCH's sections add it
"""
import difflib
import os
import re
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATCHES = os.path.join(TOP, 'patches')
DIFF_RE = re.compile(r'^diff --git a/(\S+) b/(\S+)$')


def overlay_files():
    out = []
    for top in ('tools', 'kernel', 'include', 'lib'):
        for root, _, files in os.walk(os.path.join(TOP, top)):
            for f in files:
                out.append(os.path.relpath(os.path.join(root, f), TOP))
    return set(out)


def split(text):
    """(header, [(path, section text)]) of a patch"""
    lines = text.splitlines(keepends=True)
    header, sections, cur, path = [], [], None, None
    for line in lines:
        m = DIFF_RE.match(line.rstrip('\n'))
        if m:
            if cur is not None:
                sections.append((path, ''.join(cur)))
            cur, path = [line], m.group(2)
        elif cur is None:
            header.append(line)
        else:
            cur.append(line)
    if cur is not None:
        sections.append((path, ''.join(cur)))
    return ''.join(header), sections


def patch_names(rev=None):
    if rev is None:
        return sorted(p for p in os.listdir(PATCHES) if p.endswith('.patch'))
    out = subprocess.run(['git', '-C', TOP, 'ls-tree', '--name-only', rev, 'patches/'],
                         capture_output=True, text=True, check=True).stdout
    return sorted(os.path.basename(p) for p in out.split() if p.endswith('.patch'))


def read_patch(name, rev=None):
    if rev is None:
        with open(os.path.join(PATCHES, name)) as f:
            return f.read()
    return git_show(rev, 'patches/' + name) or ''


def git_show(rev, path):
    r = subprocess.run(['git', '-C', TOP, 'show', '%s:%s' % (rev, path)],
                       capture_output=True)
    return r.stdout.decode() if r.returncode == 0 else None


def reverse_apply(text, section, what):
    with tempfile.TemporaryDirectory() as d:
        path = DIFF_RE.match(section.splitlines()[0]).group(2)
        os.makedirs(os.path.join(d, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(d, path), 'w') as f:
            f.write(text)
        r = subprocess.run(['patch', '-R', '-p1', '-s', '-F0', '--no-backup-if-mismatch',
                            '-d', d], input=section, capture_output=True, text=True)
        if r.returncode:
            sys.exit('error: %s: its section of %s does not reverse-apply:\n%s'
                     % (what, path, r.stdout + r.stderr))
        with open(os.path.join(d, path)) as f:
            return f.read()


def owners():
    """{file: the patch that adds it}, from patches/series"""
    out = {}
    with open(os.path.join(PATCHES, 'series')) as f:
        for line in f:
            words = line.split()
            if words and not words[0].startswith('#'):
                for path in words[1:]:
                    out[path] = words[0]
    return out


def cmd_upstream(patch):
    ours = overlay_files()
    with open(patch) as f:
        header, sections = split(f.read())
    sys.stdout.write(header + ''.join(s for p, s in sections if p not in ours))


def cmd_versions(outdir):
    ours = overlay_files()
    versions = {}
    for f in ours:
        with open(os.path.join(TOP, f), 'rb') as fp:
            versions[f] = fp.read()
    for name in reversed(patch_names()):
        for path, section in reversed(split(read_patch(name))[1]):
            if path in ours:
                versions[path] = reverse_apply(versions[path].decode(), section,
                                               name).encode()
    for f, data in versions.items():
        dst = os.path.join(outdir, f)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(dst, 'wb') as fp:
            fp.write(data)
        os.chmod(dst, os.stat(os.path.join(TOP, f)).st_mode & 0o777)


def diff_section(path, before, after):
    with tempfile.TemporaryDirectory() as d:
        a, b = os.path.join(d, 'a'), os.path.join(d, 'b')
        with open(a, 'w') as f:
            f.write(before)
        with open(b, 'w') as f:
            f.write(after)
        r = subprocess.run(['diff', '-u', '--label', 'a/' + path, '--label', 'b/' + path,
                            a, b], capture_output=True, text=True)
    if r.returncode == 0:
        return ''
    return 'diff --git a/%s b/%s\n%s' % (path, path, r.stdout)


def cmd_refresh(patch, files, rev):
    names = patch_names()
    if patch not in names:
        sys.exit('error: no patches/%s' % patch)
    later = names[names.index(patch) + 1:]
    header, sections = split(read_patch(patch))
    new = {p: s for p, s in sections}
    for path in files:
        owner = owners().get(path)
        if owner is None or owner >= patch:
            new.pop(path, None)     # the patch adds it whole: no diff of it
            print('%s: added by %s, not changed by it' % (path, owner or 'no patch'))
            continue
        before = git_show(rev, path)
        if before is None:
            sys.exit('error: %s is not in %s' % (path, rev))
        old_names = patch_names(rev)
        for name in reversed([n for n in old_names if n >= patch]):
            for p, s in reversed(split(read_patch(name, rev))[1]):
                if p == path:
                    before = reverse_apply(before, s, name + ' at ' + rev)
        with open(os.path.join(TOP, path)) as f:
            after = f.read()
        for name in reversed(later):
            for p, s in reversed(split(read_patch(name))[1]):
                if p == path:
                    after = reverse_apply(after, s, name)
        new[path] = diff_section(path, before, after)
    order = [p for p, _ in sections] + [p for p in files if p not in dict(sections)]
    with open(os.path.join(PATCHES, patch), 'w') as f:
        f.write(header + ''.join(new[p] for p in sorted(set(order), key=order.index)
                                 if p in new))


def carve_text(text, final, without, what):
    """text without what final has and without lacks: each change of final
    into without is made where its lines are found in text, with as much
    of final's context around them as it takes to find them once"""
    a = final.splitlines(keepends=True)
    b = without.splitlines(keepends=True)
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in reversed(ops):
        if tag == 'equal':
            continue
        lo, hi = (i1, i2) if i1 < i2 else (i1 - 1, i1)     # an insertion: its anchor
        while True:
            old = ''.join(a[lo:hi])
            n = text.count(old)
            if n == 1:
                text = text.replace(old, ''.join(a[lo:i1]) + ''.join(b[j1:j2]) +
                                    ''.join(a[i2:hi]))
                break
            if n == 0 and (lo, hi) == ((i1, i2) if i1 < i2 else (i1 - 1, i1)):
                print('%s: not there: %s' % (what, a[i1:i2][0].strip() if i1 < i2 else
                                             ''.join(b[j1:j2]).strip()[:60]),
                      file=sys.stderr)
                break
            if n == 0 or (lo == 0 and hi == len(a)):
                return None
            lo, hi = max(lo - 1, 0), min(hi + 1, len(a))
    return text


def replace_section(name, path, section):
    header, sections = split(read_patch(name))
    paths = [p for p, _ in sections]
    new = dict(sections)
    if section:
        new[path] = section
    else:
        new.pop(path, None)
    if path not in paths:
        paths.append(path)
    with open(os.path.join(PATCHES, name), 'w') as f:
        f.write(header + ''.join(new[p] for p in paths if p in new))


def cmd_carve(patch, without_dir, files):
    names = patch_names()
    if not names or names[-1] != patch:
        sys.exit('error: %s is not the last patch' % patch)
    for path in files:
        with open(os.path.join(TOP, path)) as f:
            final = f.read()
        with open(os.path.join(without_dir, path)) as f:
            without = f.read()
        # every version of the file, from the one its patch adds to HEAD's
        text = git_show('HEAD', path)
        touching = [n for n in names[:-1]
                    if any(p == path for p, _ in split(read_patch(n))[1])]
        texts = {}
        for name in reversed(touching):
            for p, s in reversed(split(read_patch(name))[1]):
                if p == path:
                    texts[name] = text
                    text = reverse_apply(text, s, name)
        owner_text = text
        carved = []
        for name, t in [(owners().get(path), owner_text)] + [(n, texts[n]) for n in touching]:
            out = carve_text(t, git_show('HEAD', path), without,
                             '%s as of %s' % (path, name))
            if out is None:
                sys.exit('error: take the feature out of %s as of %s by hand' % (path, name))
            carved.append((name, out))
        for (_, before), (name, after) in zip(carved, carved[1:]):
            replace_section(name, path, diff_section(path, before, after))
        replace_section(patch, path, diff_section(path, carved[-1][1], final))
        print('%s: carved out of %d versions' % (path, len(carved)))


def main(argv):
    if len(argv) >= 3 and argv[1] == 'upstream':
        cmd_upstream(argv[2])
    elif len(argv) == 3 and argv[1] == 'versions':
        cmd_versions(argv[2])
    elif len(argv) >= 4 and argv[1] == 'refresh':
        args, rev = argv[3:], 'HEAD'
        if args[0] == '--base':
            rev, args = args[1], args[2:]
        cmd_refresh(argv[2], args, rev)
    elif len(argv) >= 5 and argv[1] == 'carve':
        cmd_carve(argv[2], argv[3], argv[4:])
    else:
        sys.exit(__doc__)


if __name__ == '__main__':
    main(sys.argv)
