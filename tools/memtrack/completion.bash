# bash completion for memtrack(1): commands, their options, and the values
# of the options that take one (modes, backends, compression presets, bench
# suites). Installed as share/bash-completion/completions/memtrack.
# tests/tool/options.sh checks that every option `memtrack CMD --help` lists
# is here.

_memtrack()
{
    local cur prev words cword
    if declare -F _init_completion >/dev/null; then
        _init_completion || return
    else
        cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
        words=("${COMP_WORDS[@]}") cword=$COMP_CWORD
    fi
    local commands="record info verify dump report bench check help"
    local cmd= i
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
            --) # what follows is the traced application's command line
                if declare -F _command_offset >/dev/null; then _command_offset $((i + 1)); fi
                return ;;
            -*) ;;
            *) [ -z "$cmd" ] && cmd=${words[i]} ;;
        esac
    done
    if [ -z "$cmd" ]; then
        COMPREPLY=($(compgen -W "$commands --help -h --version -V" -- "$cur"))
        return
    fi
    case $cmd:$prev in
        record:--mode) COMPREPLY=($(compgen -W "auto guard shadow scan copy" -- "$cur")); return ;;
        record:--backend) COMPREPLY=($(compgen -W "auto signal uffd" -- "$cur")); return ;;
        record:--compression) COMPREPLY=($(compgen -W "default fast none" -- "$cur")); return ;;
        record:--trigger) COMPREPLY=($(compgen -W "USR1 USR2 HUP" -- "$cur")); return ;;
        record:--layer-dir) COMPREPLY=($(compgen -d -- "$cur")); return ;;
        record:-o | report:-o | dump:-o | check:--log | check:--lib)
            COMPREPLY=($(compgen -f -- "$cur")); return ;;
        record:--frames | dump:--submit | dump:--memory | dump:--object | check:--redzone | \
        check:--error-exitcode) return ;;
    esac
    local opts=
    case $cmd in
        record) opts="-o --mode --verify --compression --backend --follow-children --no-preload
                      --frames --trigger --quiet --layer-dir --help" ;;
        info) opts="--memories --json --help" ;;
        verify) opts="--all --json --help" ;;
        dump) opts="--submit --memory --object -o --help" ;;
        report) opts="-o --help" ;;
        bench) opts="--quick --json --callgrind --list --help"
            if [[ $cur != -* ]]; then
                COMPREPLY=($(compgen -W "track diff trace alloc capture stream coherence all" -- "$cur"))
                return
            fi ;;
        check) opts="--error-exitcode --no-init --redzone --sync --log --verbose --lib --help" ;;
        help) COMPREPLY=($(compgen -W "$commands" -- "$cur")); return ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    else
        # Traces for the commands that read one.
        case $cmd in
            info | verify | dump | report)
                COMPREPLY=($(compgen -f -X '!*.mtrace' -- "$cur") $(compgen -d -- "$cur")) ;;
        esac
    fi
}
complete -F _memtrack memtrack
